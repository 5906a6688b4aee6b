package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/providers"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// Verdicts of a preflight finding.
const (
	// verdictRefused: this manager would refuse the network (a parameterError), where OKG
	// builds it.
	verdictRefused = "refused"
	// verdictDifferent: admitted, with a network that differs from OKG's in a documented way.
	verdictDifferent = "different"
	// verdictWarning: admitted with an admission warning OKG does not give.
	verdictWarning = "warning"
	// verdictUnserved: a type of a provider the configuration hands over that this manager
	// does not serve: OKG serves it while its provider is on, nobody after the handover (the
	// manager's guard refuses the handover while such an object exists).
	verdictUnserved = "unserved"
)

// The headings of docs/okg-compatibility.md a finding names ("treated differently" means
// hitting one of them).
const (
	headingBadInput       = "Bad input is an error, not a panic or a silent skip"
	headingIngressGuards  = "Injection annotations and other namespaces' hosts are refused"
	headingHostPortInTmpl = "A host port the pod declares for a requested port is replaced"
	headingForeignObjects = "Objects of someone else are not taken over"
	headingRules          = "What a network-conf may ask for is the platform's"
	headingProviderWhole  = "A provider is handed over whole"
)

// maxPreflightOrdinals bounds the ordinals of a GameServerSet whose hosts and object names
// preflight checks.
const maxPreflightOrdinals = 1000

// finding is one object this manager would refuse or treat differently from OKG.
type finding struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	NetworkType string `json:"networkType"`
	// Verdict is refused, different, warning or unserved.
	Verdict string `json:"verdict"`
	// Guardrail is the heading of docs/okg-compatibility.md that explains the difference.
	Guardrail string `json:"guardrail"`
	// Key is the provider configuration key that would admit it as OKG does; empty when no
	// key does (the object must change).
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail"`
}

// preflightReport is what preflight prints with -o json.
type preflightReport struct {
	// Checked counts the GameServerSets and pods of the types this manager serves and of
	// the other types of the cloud providers the configuration hands over.
	Checked int `json:"checked"`
	// Refused counts the findings refused and unserved.
	Refused int `json:"refused"`
	// Unserved counts the objects of a type this manager does not serve, of a provider the
	// configuration hands over (among Checked and Refused).
	Unserved int       `json:"unserved"`
	Findings []finding `json:"findings"`
}

// cluster is what preflight reads: GameServerSets, pods, IngressClasses, Ingresses and
// Services, from the cluster or a dump.
type cluster struct {
	gameServerSets []*unstructured.Unstructured
	pods           []*corev1.Pod
	classes        []networkingv1.IngressClass
	ingresses      []*networkingv1.Ingress
	services       []*corev1.Service
	// namespaces are the Namespaces by name (for the network-conf rules' namespaceSelector
	// and namespaceObject); one that is missing counts as unknown.
	namespaces map[string]*corev1.Namespace
}

type preflightOptions struct {
	files    []string
	policies []string
	output   string
	kube     kubeFlags
}

func newPreflightCommand(s *streams, g *globalOptions) *cobra.Command {
	o := &preflightOptions{}
	cmd := &cobra.Command{
		Use:   "preflight [-f FILE|DIR ...] [-o table|json]",
		Short: "List the GameServerSets and pods this manager would refuse or treat differently from OKG",
		Long: `preflight is the check before handing OKG's network types over to this manager.
It reads every GameServerSet and every pod of the types this manager serves
(Kubernetes-HostPort, Kubernetes-NodePort, Kubernetes-Ingress, and the cloud types of the
providers --provider-config enables) and lists each one this manager would refuse (a
parameterError where OKG builds the network), admit with a warning OKG does not give, or
serve differently from OKG. For a cloud provider the configuration enables, an object of
one of its types this manager does not serve is "unserved": OKG enables a provider whole,
so after the handover nobody would serve it. Each finding names the
guardrail (its heading in docs/okg-compatibility.md) and, where one exists, the provider
configuration key (--provider-config, the manager's) that would admit it as OKG does.

It checks the plugins' own parameter checks (the same code the webhooks run), the
IngressClassName against the cluster's IngressClasses, a Host that an Ingress of another
namespace serves, a host port a pod template declares for a port HostPort allocates, and
a Service or Ingress named like a game server that is neither its own nor OKG's.

By default it reads the cluster (kubectl's connection flags; it needs list on
gameserversets, pods, ingressclasses, ingresses and services). With -f it reads a dump
instead: kubectl get -o yaml output (Lists) or manifests, for example
  kubectl get gameserversets,pods,ingresses,services -A -o yaml > dump.yaml
  kubectl get ingressclasses -o yaml >> dump.yaml   (as a second document, after ---)
Pods of a GameServerSet that is in the input are covered by the GameServerSet's finding.

With --policies it also checks the network-conf rules (spec.networkConfRules) of the root
policies in those files, as the webhooks would once they are applied: a rule that does not
hold is refused (an Audit policy's, a warning). Add the Namespaces to a dump
(kubectl get namespaces -o yaml) for rules that select by namespaceSelector; live, it lists
them (a Namespace it cannot read selects every rule, as the webhooks fail closed).
Exit code 0: nothing would be refused; 1: something would be; 2: usage or I/O error.`,
		Example: `  kubectl npp preflight --provider-config config.toml
  nppctl preflight -f dump.yaml -o json
  kubectl npp preflight --policies config/samples/network-conf-rules.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPreflight(cmd.Context(), s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.files, "filename", "f", nil, "Read the objects from these files or directories (- for stdin) instead of the cluster.")
	f.StringVarP(&o.output, "output", "o", "table", "Output format: table or json.")
	f.StringSliceVar(&o.policies, "policies", nil, "Also check the network-conf rules of the root policies in these files or directories (a new rule before it is applied).")
	o.kube.bind(f)
	return cmd
}

func runPreflight(ctx context.Context, s *streams, g *globalOptions, o *preflightOptions) error {
	if o.output != "table" && o.output != "json" {
		return usageError("--output %q: expected table or json", o.output)
	}
	cfg, err := providerConfig(g)
	if err != nil {
		return err
	}
	var c *cluster
	if len(o.files) > 0 {
		docs, err := readPaths(o.files, s.in)
		if err != nil {
			return err
		}
		var problems []string
		c, problems = clusterFromDocuments(docs)
		for _, p := range problems {
			fmt.Fprintln(s.errOut, p)
		}
		if len(problems) > 0 {
			return &ioError{fmt.Errorf("%d documents could not be read", len(problems))}
		}
	} else {
		cl, err := o.kube.connect()
		if err != nil {
			return err
		}
		if c, err = liveCluster(ctx, cl); err != nil {
			return err
		}
	}
	var rules *policy.Resolver
	if len(o.policies) > 0 {
		loader, err := newPolicyLoader(ctx, g)
		if err != nil {
			return err
		}
		docs, err := readPaths(o.policies, s.in)
		if err != nil {
			return err
		}
		set := loader.load(ctx, docs)
		reportInvalidPolicies(s.errOut, set)
		if len(set.problems) > 0 {
			return errInvalid
		}
		store, err := policy.NewStoreFromPolicies(ctx, policy.StoreOptions{RootNamespace: g.rootNamespace}, set.policies)
		if err != nil {
			return err
		}
		rules = policy.NewResolver(store)
	}
	r, err := preflight(ctx, c, cfg, rules)
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if err := printPreflight(s.out, r); err != nil {
		return err
	}
	if r.Refused > 0 {
		return errInvalid
	}
	return nil
}

// preflight checks every GameServerSet and pod of c under the provider configuration cfg,
// and, with rules (nil: none), the root policies' network-conf rules. Errors come from the
// plugins' initialisation.
func preflight(ctx context.Context, c *cluster, cfg plugin.Config, rules *policy.Resolver) (*preflightReport, error) {
	reg, err := plugin.NewRegistry(kubernetes.Plugins(cfg)...)
	if err != nil {
		return nil, err
	}
	if err := reg.InitAll(ctx, nil, cfg); err != nil {
		return nil, fmt.Errorf("initialise the plugins: %w", err)
	}
	// The network-conf rules are checked for every type the configuration serves, the cloud
	// ones included (their views need no initialisation).
	views, err := plugin.NewRegistry(providers.Plugins(cfg)...)
	if err != nil {
		return nil, err
	}
	r := &preflightReport{Findings: []finding{}}
	sets := map[string]bool{}
	type subject struct {
		kind     string
		pod      *corev1.Pod
		replicas int
	}
	var subjects []subject
	for _, gss := range c.gameServerSets {
		pod, _, err := podFromGameServerSet(gss)
		if err != nil {
			r.Findings = append(r.Findings, finding{Kind: "GameServerSet", Namespace: gss.GetNamespace(), Name: gss.GetName(),
				Verdict: verdictRefused, Guardrail: headingBadInput, Detail: err.Error()})
			r.Checked++
			r.Refused++
			continue
		}
		sets[gss.GetNamespace()+"/"+gss.GetName()] = true
		// Hosts and object names are checked for every ordinal up to spec.replicas (at least
		// one, at most maxPreflightOrdinals).
		replicas := gameServerSetReplicas(gss)
		subjects = append(subjects, subject{kind: "GameServerSet", pod: pod, replicas: int(min(max(replicas, 1), maxPreflightOrdinals))})
	}
	for _, p := range c.pods {
		if owner := p.Labels[networkstatus.LabelOwnerGSS]; owner != "" && sets[p.Namespace+"/"+owner] {
			continue
		}
		subjects = append(subjects, subject{kind: "Pod", pod: p, replicas: 1})
	}
	for _, sub := range subjects {
		networkType := sub.pod.Annotations[networkstatus.AnnotationNetworkType]
		p, ok := reg.Get(networkType)
		vp, viewed := views.Get(networkType)
		provider := providerOf(networkType)
		handedOver := provider != "" && provider != "kubernetes" && slices.Contains(cfg.EnabledProviders(), provider)
		if !ok && !viewed && !handedOver {
			continue
		}
		r.Checked++
		name := sub.pod.Name
		if sub.kind == "GameServerSet" {
			name = sub.pod.Labels[networkstatus.LabelOwnerGSS]
		}
		add := func(verdict, heading, key, detail string) {
			r.Findings = append(r.Findings, finding{Kind: sub.kind, Namespace: sub.pod.Namespace, Name: name, NetworkType: networkType,
				Verdict: verdict, Guardrail: heading, Key: key, Detail: detail})
			if verdict == verdictRefused {
				r.Refused++
			}
		}
		if handedOver && !viewed {
			newer := ""
			if !plugin.IsOKGNetworkType(networkType) {
				newer = " (a type OKG d76ace2, the release this manager follows, does not have: a newer OKG's)"
			}
			add(verdictUnserved, headingProviderWhole, provider+".enable",
				fmt.Sprintf("[%s] is enabled in the provider configuration, and this manager has no plugin for %s%s: OKG serves it while its [%s] is on, nobody once it is off (the manager's guard refuses the handover while such an object exists)", provider, networkType, newer, provider))
			r.Refused++
			r.Unserved++
			continue
		}
		if rules != nil && viewed {
			checkRulesPreflight(ctx, rules, c, vp, sub.pod, add)
		}
		if !ok {
			// A cloud type this manager serves: its plugin's own parameter checks, as the
			// webhooks run them (they read no other object).
			if cv, isCV := vp.(plugin.ConfValidator); isCV && handedOver {
				failure, warnings := plugin.Split(cv.ValidateConf(sub.pod))
				if failure != nil {
					heading, key := guardrailOf(failure)
					add(verdictRefused, heading, key, failure.Error())
				}
				for _, w := range warnings {
					add(verdictWarning, headingBadInput, "", w.Error())
				}
			}
			continue
		}
		if cv, ok := p.(plugin.ConfValidator); ok {
			failure, warnings := plugin.Split(cv.ValidateConf(sub.pod))
			if failure != nil {
				heading, key := guardrailOf(failure)
				add(verdictRefused, heading, key, failure.Error())
			}
			for _, w := range warnings {
				add(verdictWarning, headingBadInput, "", w.Error())
			}
			if failure != nil {
				continue
			}
		}
		conf, err := networkstatus.ConfFromPod(sub.pod)
		if err != nil {
			continue // ValidateConf reported it
		}
		switch networkType {
		case kubernetes.IngressName:
			checkIngressPreflight(c, cfg, sub.pod, conf, sub.replicas, add)
		case kubernetes.HostPortName:
			for _, d := range kubernetes.DeclaredHostPorts(sub.pod) {
				add(verdictDifferent, headingHostPortInTmpl, "", d+": this manager replaces it with the allocated one, OKG adds a second entry and the pod cannot be scheduled")
			}
		}
		if networkType == kubernetes.NodePortName || networkType == kubernetes.IngressName {
			checkForeignObjects(c, sub.pod, sub.kind == "GameServerSet", sub.replicas, add)
		}
	}
	return r, nil
}

// checkRulesPreflight evaluates the network-conf rules of rules' root policies that select
// pod, as the webhooks do at CREATE: an Enforce rule that does not hold is refused, an Audit
// policy's a warning, each naming the rule and its policy.
func checkRulesPreflight(ctx context.Context, rules *policy.Resolver, c *cluster, p plugin.Plugin, pod *corev1.Pod, add func(verdict, heading, key, detail string)) {
	in := policy.Input{Pod: pod, Request: policy.RequestInfo{Operation: string(plugin.OperationCreate)}, Plugin: describePlugin(p)}
	if ns, ok := c.namespaces[pod.Namespace]; ok {
		in.Namespace = ns
	} else {
		in.NamespaceUnknown = true
	}
	res, err := rules.Begin(ctx, in)
	if err != nil || !res.HasNetworkConfRules() {
		return
	}
	network, params, err := podwebhook.NetworkOf(p, pod)
	if err != nil {
		return // ValidateConf reported it
	}
	violations := res.CheckNetworkConf(ctx, network)
	if perr := podwebhook.RuleError(violations, params); perr != nil {
		add(verdictRefused, headingRules, "", perr.Error())
	}
	for _, v := range violations {
		if v.Audit {
			add(verdictWarning, headingRules, "", "would be refused once Enforce: "+v.String())
		}
	}
}

// providerOf returns the provider table of network type t as the manager's guard reads it
// (okgguard.ProviderOf: by the type's prefix, so a type of a later OKG counts too), "" for
// a type of no provider.
func providerOf(t string) string { return okgguard.ProviderOf(t) }

// guardrailOf names the heading of docs/okg-compatibility.md and the provider configuration
// key (if any) behind a plugin's ParameterError.
func guardrailOf(e *plugin.Error) (heading, key string) {
	msg := e.Error()
	switch {
	case e.Param == kubernetes.ParamAnnotation:
		return headingIngressGuards, "kubernetes.ingress.allowed_annotations"
	case strings.Contains(msg, "allow_catch_all_host"):
		return headingIngressGuards, "kubernetes.ingress.allow_catch_all_host"
	case strings.Contains(msg, "allowed_host_suffixes"):
		return headingIngressGuards, "kubernetes.ingress.allowed_host_suffixes"
	case strings.Contains(msg, "max_ports_per_pod"):
		return headingBadInput, "kubernetes.hostPort.max_ports_per_pod"
	}
	return headingBadInput, ""
}

// checkIngressPreflight checks an Ingress game server's class against the cluster's
// IngressClasses, and its Host and TlsHosts (for ordinals 0 to replicas-1) against the hosts
// Ingresses of other namespaces serve.
func checkIngressPreflight(c *cluster, cfg plugin.Config, pod *corev1.Pod, conf networkstatus.Conf, replicas int, add func(verdict, heading, key, detail string)) {
	if classes := conf.Values(kubernetes.ParamIngressClassName); len(classes) == 1 {
		failure, warnings := plugin.Split(kubernetes.IngressClassAllowed(classes[0], c.classes, cfg.Kubernetes.Ingress))
		if failure != nil {
			add(verdictRefused, headingIngressGuards, "kubernetes.ingress.allowed_ingress_classes", failure.Error())
		}
		for _, w := range warnings {
			add(verdictWarning, headingIngressGuards, "", w.Error())
		}
	}
	// A host belongs to the namespace that served it first (kubernetes.FirstClaim): the
	// game servers' own Ingresses, made by OKG, usually are that claim.
	hosts := slices.Concat(conf.Values(kubernetes.ParamHost), conf.Values(kubernetes.ParamTLSHosts))
	for _, h := range hosts {
		for _, one := range strings.Split(h, ",") {
			for i := range replicas {
				host := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(one), "<id>", strconv.Itoa(i)))
				if first := kubernetes.FirstClaim(c.ingresses, host); first != nil && first.Namespace != pod.Namespace {
					add(verdictRefused, headingIngressGuards, "", fmt.Sprintf("host %q is served by Ingress %s/%s of another namespace, which served it first: give the game servers their own host or move them to that namespace", host, first.Namespace, first.Name))
					break
				}
			}
		}
	}
}

// checkForeignObjects reports a Service or Ingress named like one of the game server's pods
// that is neither owned by the pod or its GameServerSet nor carries OKG's hash annotation:
// this manager leaves it alone and the pod gets no network.
func checkForeignObjects(c *cluster, pod *corev1.Pod, fromSet bool, replicas int, add func(verdict, heading, key, detail string)) {
	names := []string{pod.Name}
	if fromSet {
		base := strings.TrimSuffix(pod.Name, "-0")
		names = names[:0]
		for i := range replicas {
			names = append(names, fmt.Sprintf("%s-%d", base, i))
		}
	}
	gss := pod.Labels[networkstatus.LabelOwnerGSS]
	foreign := func(kind, name string, meta metav1.ObjectMeta, hashKey string) {
		if meta.Annotations[hashKey] != "" {
			return
		}
		for _, o := range meta.OwnerReferences {
			if (o.Kind == "Pod" && o.Name == name) || (o.Kind == "GameServerSet" && o.Name == gss) {
				return
			}
		}
		add(verdictRefused, headingForeignObjects, "", fmt.Sprintf("%s %s/%s exists and is neither the game server's nor OKG's (no owner, no %s): it is left alone and the pod gets no network", kind, meta.Namespace, name, hashKey))
	}
	for _, name := range names {
		for _, s := range c.services {
			if s.Namespace == pod.Namespace && s.Name == name {
				foreign("Service", name, s.ObjectMeta, kubernetes.AnnotationServiceHash)
			}
		}
		if pod.Annotations[networkstatus.AnnotationNetworkType] != kubernetes.IngressName {
			continue
		}
		for _, ing := range c.ingresses {
			if ing.Namespace == pod.Namespace && ing.Name == name {
				foreign("Ingress", name, ing.ObjectMeta, kubernetes.AnnotationIngressHash)
			}
		}
	}
}

func printPreflight(w io.Writer, r *preflightReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tOBJECT\tNETWORK TYPE\tVERDICT\tGUARDRAIL\tKEY\tDETAIL")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", f.Kind, f.Namespace, f.Name, f.NetworkType, f.Verdict, f.Guardrail, orDash(f.Key), oneLine(f.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d GameServerSets and pods of the types this manager serves checked: %d would be refused, %d findings in all.\n", r.Checked-r.Unserved, r.Refused-r.Unserved, len(r.Findings))
	if err == nil && r.Unserved > 0 {
		_, err = fmt.Fprintf(w, "%d of a provider to hand over that this manager does not serve.\n", r.Unserved)
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clusterFromDocuments collects GameServerSets, Pods, IngressClasses, Ingresses and Services
// from docs, Lists flattened; other kinds are skipped. Problems name what does not decode.
func clusterFromDocuments(docs []*document) (*cluster, []string) {
	c := &cluster{}
	var problems []string
	var add func(where string, obj map[string]any)
	decode := func(where string, obj map[string]any, into any) bool {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s: %v", where, obj["kind"], err))
			return false
		}
		return true
	}
	add = func(where string, obj map[string]any) {
		switch obj["kind"] {
		case "List", "PodList", "ServiceList", "IngressList", "IngressClassList", "GameServerSetList", "NamespaceList":
			items, _ := obj["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					add(where, m)
				}
			}
		case "GameServerSet":
			u := &unstructured.Unstructured{Object: obj}
			if u.GroupVersionKind().GroupKind() == gameServerSetGVK.GroupKind() {
				c.gameServerSets = append(c.gameServerSets, u)
			}
		case "Pod":
			if p := (&corev1.Pod{}); decode(where, obj, p) {
				c.pods = append(c.pods, p)
			}
		case "IngressClass":
			if ic := (&networkingv1.IngressClass{}); decode(where, obj, ic) {
				c.classes = append(c.classes, *ic)
			}
		case "Ingress":
			if ing := (&networkingv1.Ingress{}); decode(where, obj, ing) {
				c.ingresses = append(c.ingresses, ing)
			}
		case "Service":
			if s := (&corev1.Service{}); decode(where, obj, s) {
				c.services = append(c.services, s)
			}
		case "Namespace":
			if ns := (&corev1.Namespace{}); decode(where, obj, ns) {
				if c.namespaces == nil {
					c.namespaces = map[string]*corev1.Namespace{}
				}
				c.namespaces[ns.Name] = ns
			}
		}
	}
	for _, d := range docs {
		if d.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.where(), d.err))
			continue
		}
		add(d.where(), d.obj.Object)
	}
	return c, problems
}

// gameServerSetResource is the GameServerSet resource, listed with the dynamic client.
var gameServerSetResource = schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}

// liveCluster lists what preflight reads from the cluster. A cluster without the
// GameServerSet CRD has no GameServerSets. Errors are I/O errors.
func liveCluster(ctx context.Context, cl *clients) (*cluster, error) {
	c := &cluster{}
	gss, err := cl.dynamic.Resource(gameServerSetResource).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for i := range gss.Items {
			c.gameServerSets = append(c.gameServerSets, &gss.Items[i])
		}
	case apierrors.IsNotFound(err):
	default:
		return nil, &ioError{fmt.Errorf("list GameServerSets: %w", err)}
	}
	pods, err := livePods(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Annotations[networkstatus.AnnotationNetworkType] != "" {
			c.pods = append(c.pods, p)
		}
	}
	classes, err := cl.core.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &ioError{fmt.Errorf("list IngressClasses: %w", err)}
	}
	c.classes = classes.Items
	ings, err := cl.core.NetworkingV1().Ingresses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &ioError{fmt.Errorf("list Ingresses: %w", err)}
	}
	for i := range ings.Items {
		c.ingresses = append(c.ingresses, &ings.Items[i])
	}
	svcs, err := cl.core.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &ioError{fmt.Errorf("list Services: %w", err)}
	}
	for i := range svcs.Items {
		c.services = append(c.services, &svcs.Items[i])
	}
	// The network-conf rules' namespaceSelector reads the Namespaces; without list on them
	// each counts as unknown (every rule then selects, as the webhooks fail closed).
	if nss, err := cl.core.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		c.namespaces = map[string]*corev1.Namespace{}
		for i := range nss.Items {
			c.namespaces[nss.Items[i].Name] = &nss.Items[i]
		}
	}
	return c, nil
}
