package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// leaseName is the manager's leader-election Lease (its LeaderElectionID).
const leaseName = "network-plugin-policy.policy.game.kruise.io"

// statusOptions are the flags of status.
type statusOptions struct {
	namespace        string
	managerNamespace string
	output           string
	pods             []string
	now              string
	loadBalancer     string
	ledgerName       string
	kube             kubeFlags
}

// statusReport is what status prints: the game servers' networks by namespace and plugin,
// the retrying and exhausted pods, and the manager's replicas. Its JSON and YAML forms are
// this struct's.
type statusReport struct {
	// Time is when the pods were read (the networks' ages and windows are relative to it).
	Time metav1.Time `json:"time"`
	// Networks counts game servers by namespace and plugin, sorted by both.
	Networks []networkRow `json:"networks"`
	// Retrying are the pods whose network is being retried, oldest first.
	Retrying []retryRow `json:"retrying"`
	// Exhausted are the pods whose retry window closed without a network, oldest first.
	Exhausted []retryRow `json:"exhausted"`
	// Manager are the manager's replicas and leader; nil when not read (offline without
	// manager pods in the files).
	Manager *managerStatus `json:"manager,omitempty"`
	// Audit are the Audit policies with a status.audit, their counts summed over the
	// webhook replicas, sorted by namespace and name.
	Audit []auditSummary `json:"audit,omitempty"`
	// LoadBalancerPorts are the listener ports the load-balancer plugins' ledger holds, by
	// plugin, load balancer and namespace; none when the ledger is empty or may not be read.
	LoadBalancerPorts []ledgerRow `json:"loadBalancerPorts,omitempty"`
	// UnusedSharedServices are the shared-port Services that select no game server, by
	// Service; none when Services may not be read.
	UnusedSharedServices []sharedServiceRow `json:"unusedSharedServices,omitempty"`
}

// auditSummary is one Audit policy's status.audit summed over its replicas' entries.
type auditSummary struct {
	// Policy is namespace/name@generation (the generation the counts are for).
	Policy string `json:"policy"`
	// Decided, Differing and NotEvaluated are the replicas' counts summed.
	Decided      int64 `json:"decided"`
	Differing    int64 `json:"differing"`
	NotEvaluated int64 `json:"notEvaluated"`
	// Replicas is how many replicas' entries are summed.
	Replicas int `json:"replicas"`
	// Since is the earliest window start of the entries.
	Since metav1.Time `json:"since"`
	// Latest is the latest differing admission of any replica, if any.
	Latest *v1alpha1.AuditSample `json:"latest,omitempty"`
}

// networkRow counts one namespace's game servers of one plugin by state.
type networkRow struct {
	Namespace string `json:"namespace"`
	Plugin    string `json:"plugin"`
	Ready     int    `json:"ready"`
	Waiting   int    `json:"waiting"`
	NotReady  int    `json:"notReady"`
	Retrying  int    `json:"retrying"`
	Exhausted int    `json:"exhausted"`
	Pending   int    `json:"pending"`
	// CatchUp counts pods no webhook replica has decided yet (among the states above).
	CatchUp int `json:"catchUp"`
	// OldestNotReady is how long the oldest not-Ready network of the row has been not Ready,
	// empty when none is.
	OldestNotReady string `json:"oldestNotReady,omitempty"`
}

// retryRow is one retrying or exhausted pod.
type retryRow struct {
	Pod      string `json:"pod"`
	Plugin   string `json:"plugin"`
	Attempts int32  `json:"attempts"`
	// NotReadyFor is how long the network has been not Ready (since the retry state's since).
	NotReadyFor string `json:"notReadyFor"`
	// WindowLeft is the time left in the retry window ("not scheduled" while the pod has no
	// node: its window has not started; "closed" once past the deadline).
	WindowLeft string `json:"windowLeft,omitempty"`
	// ExhaustedAction is the action taken (exhausted) or to be taken (retrying).
	ExhaustedAction string `json:"exhaustedAction"`
	// Policy is the policy that gave the retry schedule.
	Policy string `json:"policy"`
	// LastError is the last plugin failure, "type: message"; empty when the plugin succeeded
	// but the network is not Ready yet.
	LastError string `json:"lastError,omitempty"`

	since time.Time
}

// managerStatus are the manager's replicas and its leader.
type managerStatus struct {
	Namespace string `json:"namespace"`
	// Leader is the replica (pod name) that holds the Lease, empty when none does.
	Leader string `json:"leader,omitempty"`
	// LeaseRenewed is when the leader last renewed the Lease, empty when there is none.
	LeaseRenewed string           `json:"leaseRenewed,omitempty"`
	Replicas     []managerReplica `json:"replicas"`
}

// managerReplica is one manager pod.
type managerReplica struct {
	Name     string `json:"name"`
	Node     string `json:"node,omitempty"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	Leader   bool   `json:"leader"`
	Image    string `json:"image,omitempty"`
}

func newStatusCommand(s *streams, g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [-n NAMESPACE] [-o table|json|yaml]",
		Short: "Show which game servers have no network and why, and whether the manager is healthy",
		Long: `status reads every pod that carries a game.kruise.io/network-type and counts them by
namespace, plugin and network state: Ready, Waiting, NotReady (no retry), Retrying,
Exhausted (the retry window closed) and Pending (no network-status yet); CATCH-UP counts
pods no webhook replica has decided. It lists the retrying pods with their last error and
the time left in their retry window, the exhausted pods, the listener ports each namespace
holds on each load balancer (the load-balancer plugins' ledger; --load-balancer shows one),
and the manager's replicas: ready, restarts, image and which one holds the leader Lease.

The states are read from the annotations the manager writes, as its metrics read them
(npp_network_pods, docs/metrics.md). By default it reads the cluster (kubectl's connection
flags; it needs list on pods, and get on the Lease in the manager's namespace for the
leader, and get on the ledger's ConfigMaps there for the load-balancer ports). With --pods
it reads the pods (and a Lease and the ledger's ConfigMaps) from files instead, for example
the output of kubectl get pods -A -o yaml.
Exit code 0; 2: usage or I/O error.`,
		Example: `  kubectl npp status
  kubectl npp status -n arena -o yaml
  kubectl npp status --load-balancer lb-2ze8x0a1
  kubectl get pods -A -o yaml > pods.yaml && nppctl status --pods pods.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "Only the game servers of this namespace (default: every namespace).")
	f.StringVar(&o.managerNamespace, "manager-namespace", "", "The manager's namespace (its pods and leader Lease); default --root-namespace.")
	f.StringVarP(&o.output, "output", "o", "table", "Output format: table, json or yaml.")
	f.StringSliceVar(&o.pods, "pods", nil, "Read pods (and the leader Lease) from these files or directories instead of the cluster.")
	f.StringVar(&o.now, "now", "", "The current time, RFC 3339 (default: the clock); for reproducible output from --pods.")
	_ = f.MarkHidden("now")
	f.StringVar(&o.loadBalancer, "load-balancer", "", "Only the ledger's ports of this load balancer id (default: every one).")
	f.StringVar(&o.ledgerName, "lb-ledger-name", lb.DefaultLedgerName, "The manager's --lb-ledger-name: the ledger's ConfigMaps are <name>-0 to <name>-7.")
	o.kube.bind(f)
	return cmd
}

func runStatus(ctx context.Context, s *streams, g *globalOptions, o *statusOptions) error {
	if o.output != "table" && o.output != "json" && o.output != "yaml" {
		return usageError("--output %q: expected table, json or yaml", o.output)
	}
	now := time.Now()
	if o.now != "" {
		t, err := time.Parse(time.RFC3339, o.now)
		if err != nil {
			return usageError("--now %q: expected an RFC 3339 time: %v", o.now, err)
		}
		now = t
	}
	managerNS := cmp.Or(o.managerNamespace, g.rootNamespace)
	var pods []*corev1.Pod
	var lease *coordinationv1.Lease
	var policies []*v1alpha1.NetworkPluginPolicy
	var ledger []*corev1.ConfigMap
	var services []*corev1.Service
	if len(o.pods) > 0 {
		docs, err := readPaths(o.pods, s.in)
		if err != nil {
			return err
		}
		var problems []string
		pods, lease, policies, problems = podsAndLease(docs, managerNS)
		ledger = ledgerConfigMaps(docs, managerNS, o.ledgerName)
		services = servicesIn(docs)
		for _, p := range problems {
			fmt.Fprintln(s.errOut, p)
		}
		if len(problems) > 0 {
			return &ioError{fmt.Errorf("%d documents could not be read", len(problems))}
		}
	} else {
		c, err := o.kube.connect()
		if err != nil {
			return err
		}
		if pods, lease, err = livePodsAndLease(ctx, c, managerNS); err != nil {
			return err
		}
		policies = liveAuditedPolicies(ctx, c, o.namespace)
		ledger = liveLedger(ctx, c, managerNS, o.ledgerName, s.errOut)
		services = liveServices(ctx, c, o.namespace, s.errOut)
	}
	r := buildStatus(pods, lease, o.namespace, managerNS, now)
	r.Audit = auditSummaries(policies, o.namespace)
	r.LoadBalancerPorts = ledgerRows(ledger, o.namespace, o.loadBalancer)
	r.UnusedSharedServices = unusedSharedServices(services, pods, o.namespace, now)
	switch o.output {
	case "json":
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = s.out.Write(b)
		return err
	}
	return printStatus(s.out, r)
}

// livePods lists the cluster's pods, 500 at a time. Errors are I/O errors.
func livePods(ctx context.Context, c *clients) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, &ioError{fmt.Errorf("list pods: %w", err)}
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return pods, nil
		}
	}
}

// livePodsAndLease lists the cluster's pods (livePods) and gets the leader Lease of
// managerNS (none when it does not exist or may not be read).
func livePodsAndLease(ctx context.Context, c *clients, managerNS string) ([]*corev1.Pod, *coordinationv1.Lease, error) {
	pods, err := livePods(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	lease, err := c.core.CoordinationV1().Leases(managerNS).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		lease = nil
	}
	return pods, lease, nil
}

// liveAuditedPolicies lists the NetworkPluginPolicies of namespace (every namespace when
// empty); none when they may not be listed (status needs no more than pods and the Lease).
func liveAuditedPolicies(ctx context.Context, c *clients, namespace string) []*v1alpha1.NetworkPluginPolicy {
	list, err := c.policy.PolicyV1alpha1().NetworkPluginPolicies(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := make([]*v1alpha1.NetworkPluginPolicy, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// auditSummaries sums the status.audit entries of each policy of namespace (every
// namespace when empty) that has one.
func auditSummaries(policies []*v1alpha1.NetworkPluginPolicy, namespace string) []auditSummary {
	var out []auditSummary
	for _, p := range policies {
		if p.Status.Audit == nil || len(p.Status.Audit.Replicas) == 0 || namespace != "" && p.Namespace != namespace {
			continue
		}
		s := auditSummary{Replicas: len(p.Status.Audit.Replicas)}
		var gen int64
		for _, e := range p.Status.Audit.Replicas {
			s.Decided += e.Decided
			s.Differing += e.Differing
			s.NotEvaluated += e.NotEvaluated
			gen = max(gen, e.ObservedGeneration)
			if e.WindowStart != nil && (s.Since.IsZero() || e.WindowStart.Before(&s.Since)) {
				s.Since = *e.WindowStart
			}
			if len(e.Samples) > 0 && (s.Latest == nil || s.Latest.Time.Before(e.Samples[0].Time)) {
				s.Latest = e.Samples[0].DeepCopy()
			}
		}
		s.Policy = fmt.Sprintf("%s/%s@%d", p.Namespace, p.Name, gen)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b auditSummary) int { return strings.Compare(a.Policy, b.Policy) })
	return out
}

// podsAndLease collects the Pods (also inside Lists), the manager's Lease and the
// NetworkPluginPolicies from docs; other kinds are skipped. Problems name documents that do
// not decode.
func podsAndLease(docs []*document, managerNS string) ([]*corev1.Pod, *coordinationv1.Lease, []*v1alpha1.NetworkPluginPolicy, []string) {
	var pods []*corev1.Pod
	var lease *coordinationv1.Lease
	var policies []*v1alpha1.NetworkPluginPolicy
	var problems []string
	var add func(where string, obj map[string]any)
	add = func(where string, obj map[string]any) {
		switch obj["kind"] {
		case "List", "PodList":
			items, _ := obj["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					if m["kind"] == nil {
						m["kind"] = "Pod"
					}
					add(where, m)
				}
			}
		case "Pod":
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, pod); err != nil {
				problems = append(problems, fmt.Sprintf("%s: Pod: %v", where, err))
				return
			}
			pods = append(pods, pod)
		case "NetworkPluginPolicy":
			p := &v1alpha1.NetworkPluginPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, p); err != nil {
				problems = append(problems, fmt.Sprintf("%s: NetworkPluginPolicy: %v", where, err))
				return
			}
			policies = append(policies, p)
		case "Lease":
			l := &coordinationv1.Lease{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, l); err != nil {
				problems = append(problems, fmt.Sprintf("%s: Lease: %v", where, err))
				return
			}
			if l.Name == leaseName && l.Namespace == managerNS {
				lease = l
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
	return pods, lease, policies, problems
}

// buildStatus classifies pods (network.Classify; any network type counts) at now, only those
// of namespace when it is not empty, and reads the manager's replicas from the pods of
// managerNS with the manager's label and lease.
func buildStatus(pods []*corev1.Pod, lease *coordinationv1.Lease, namespace, managerNS string, now time.Time) *statusReport {
	r := &statusReport{Time: metav1.NewTime(now.UTC()), Networks: []networkRow{}, Retrying: []retryRow{}, Exhausted: []retryRow{}}
	rows := map[[2]string]*networkRow{}
	oldest := map[[2]string]time.Time{}
	var replicas []*corev1.Pod
	for _, pod := range pods {
		if pod.Namespace == managerNS && pod.Labels["app.kubernetes.io/name"] == "network-plugin-policy" {
			replicas = append(replicas, pod)
		}
		if namespace != "" && pod.Namespace != namespace {
			continue
		}
		n, ok := network.Classify(pod, nil, now)
		if !ok {
			continue
		}
		key := [2]string{pod.Namespace, n.Plugin}
		row := rows[key]
		if row == nil {
			row = &networkRow{Namespace: pod.Namespace, Plugin: n.Plugin}
			rows[key] = row
		}
		switch n.State {
		case network.StateReady:
			row.Ready++
		case network.StateWaiting:
			row.Waiting++
		case network.StateNotReady:
			row.NotReady++
		case network.StateRetrying:
			row.Retrying++
		case network.StateExhausted:
			row.Exhausted++
		case network.StatePending:
			row.Pending++
		}
		if n.CatchUp {
			row.CatchUp++
		}
		if n.State.NotReady() && !n.NotReadySince.IsZero() && (oldest[key].IsZero() || n.NotReadySince.Before(oldest[key])) {
			oldest[key] = n.NotReadySince
		}
		if n.State == network.StateRetrying || n.State == network.StateExhausted {
			rr := retryRowOf(pod, n, now)
			if n.State == network.StateRetrying {
				r.Retrying = append(r.Retrying, rr)
			} else {
				r.Exhausted = append(r.Exhausted, rr)
			}
		}
	}
	for key, row := range rows {
		if t := oldest[key]; !t.IsZero() {
			row.OldestNotReady = age(now.Sub(t))
		}
		r.Networks = append(r.Networks, *row)
	}
	slices.SortFunc(r.Networks, func(a, b networkRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Plugin, b.Plugin))
	})
	byAge := func(a, b retryRow) int { return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.Pod, b.Pod)) }
	slices.SortFunc(r.Retrying, byAge)
	slices.SortFunc(r.Exhausted, byAge)
	if len(replicas) > 0 || lease != nil {
		r.Manager = managerOf(replicas, lease, managerNS)
	}
	return r
}

// retryRowOf describes a retrying or exhausted pod.
func retryRowOf(pod *corev1.Pod, n network.PodNetwork, now time.Time) retryRow {
	st := n.Retry
	rr := retryRow{
		Pod: pod.Namespace + "/" + pod.Name, Plugin: n.Plugin, Attempts: st.Attempts,
		NotReadyFor: age(now.Sub(n.NotReadySince)), ExhaustedAction: string(st.ExhaustedAction),
		Policy: st.Policy, since: n.NotReadySince,
	}
	if st.LastError != nil {
		rr.LastError = st.LastError.Type
		if st.LastError.Message != "" {
			rr.LastError += ": " + st.LastError.Message
		}
	}
	if n.State == network.StateRetrying {
		if deadline, ok := st.DeadlineFor(pod); !ok {
			rr.WindowLeft = "not scheduled"
		} else if left := deadline.Sub(now); left > 0 {
			rr.WindowLeft = age(left)
		} else {
			rr.WindowLeft = "closed"
		}
	}
	return rr
}

// managerOf describes the manager's replicas; the leader is the replica whose name the
// Lease's holderIdentity starts with (client-go's identity is "<hostname>_<uuid>", and a
// pod's hostname is its name).
func managerOf(replicas []*corev1.Pod, lease *coordinationv1.Lease, ns string) *managerStatus {
	m := &managerStatus{Namespace: ns, Replicas: []managerReplica{}}
	if lease != nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		m.Leader = holder
		if lease.Spec.RenewTime != nil {
			m.LeaseRenewed = lease.Spec.RenewTime.UTC().Format(time.RFC3339)
		}
	}
	for _, p := range replicas {
		rep := managerReplica{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Leader: p.Name == m.Leader}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				rep.Ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			rep.Restarts += cs.RestartCount
		}
		for _, c := range p.Spec.Containers {
			if c.Name == "manager" {
				rep.Image = c.Image
			}
		}
		m.Replicas = append(m.Replicas, rep)
	}
	slices.SortFunc(m.Replicas, func(a, b managerReplica) int { return cmp.Compare(a.Name, b.Name) })
	return m
}

// age formats d like kubectl's AGE column, to the second below 10 minutes: 45s, 3m20s, 39m,
// 2h5m, 3d4h.
func age(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// printStatus writes r as tables.
func printStatus(w io.Writer, r *statusReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Game-server networks at %s\n", r.Time.UTC().Format(time.RFC3339))
	if len(r.Networks) == 0 {
		fmt.Fprintln(tw, "No pod carries a game.kruise.io/network-type.")
	} else {
		fmt.Fprintln(tw, "NAMESPACE\tPLUGIN\tREADY\tWAITING\tNOT-READY\tRETRYING\tEXHAUSTED\tPENDING\tCATCH-UP\tOLDEST-NOT-READY")
		for _, n := range r.Networks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", n.Namespace, n.Plugin, n.Ready, n.Waiting, n.NotReady,
				n.Retrying, n.Exhausted, n.Pending, n.CatchUp, cmp.Or(n.OldestNotReady, "-"))
		}
	}
	for _, sec := range []struct {
		title string
		rows  []retryRow
	}{{"Retrying", r.Retrying}, {"Exhausted", r.Exhausted}} {
		if len(sec.rows) == 0 {
			continue
		}
		fmt.Fprintf(tw, "\n%s (%d)\n", sec.title, len(sec.rows))
		fmt.Fprintln(tw, "POD\tPLUGIN\tATTEMPTS\tNOT-READY-FOR\tWINDOW-LEFT\tACTION\tPOLICY\tLAST-ERROR")
		for _, rr := range sec.rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", rr.Pod, rr.Plugin, rr.Attempts, rr.NotReadyFor,
				cmp.Or(rr.WindowLeft, "-"), rr.ExhaustedAction, rr.Policy, cmp.Or(oneLine(rr.LastError), "-"))
		}
	}
	if len(r.Audit) > 0 {
		fmt.Fprintf(tw, "\nAudit policies (%d)\n", len(r.Audit))
		fmt.Fprintln(tw, "POLICY\tDECIDED\tDIFFERING\tNOT-EVALUATED\tREPLICAS\tSINCE\tLATEST-DIFFERING")
		for _, a := range r.Audit {
			latest := "-"
			if l := a.Latest; l != nil {
				latest = oneLine(fmt.Sprintf("%s %s, would: %s", l.Pod, l.Operation, l.WouldDecide))
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", a.Policy, a.Decided, a.Differing, a.NotEvaluated, a.Replicas,
				a.Since.UTC().Format(time.RFC3339), latest)
		}
	}
	if len(r.LoadBalancerPorts) > 0 {
		fmt.Fprintf(tw, "\nLoad-balancer ports held (%d)\n", len(r.LoadBalancerPorts))
		fmt.Fprintln(tw, "PLUGIN\tLOAD-BALANCER\tNAMESPACE\tCOUNT\tOWNERS\tOLDEST\tPORTS")
		for _, l := range r.LoadBalancerPorts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", l.Plugin, l.LoadBalancer, l.Namespace, l.Count, l.Owners, l.Oldest, oneLine(l.Ports))
		}
	}
	if len(r.UnusedSharedServices) > 0 {
		fmt.Fprintf(tw, "\nShared Services without game servers (%d): kept by the manager; delete those no longer wanted\n", len(r.UnusedSharedServices))
		fmt.Fprintln(tw, "SERVICE\tPLUGIN\tLOAD-BALANCER\tAGE\tADDRESS")
		for _, u := range r.UnusedSharedServices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Service, u.Plugin, u.LoadBalancer, u.Age, cmp.Or(u.Address, "-"))
		}
	}
	if m := r.Manager; m != nil {
		fmt.Fprintf(tw, "\nManager (namespace %s, leader %s)\n", m.Namespace, cmp.Or(m.Leader, "none"))
		fmt.Fprintln(tw, "REPLICA\tREADY\tPHASE\tRESTARTS\tLEADER\tNODE\tIMAGE")
		for _, rep := range m.Replicas {
			fmt.Fprintf(tw, "%s\t%t\t%s\t%d\t%t\t%s\t%s\n", rep.Name, rep.Ready, rep.Phase, rep.Restarts, rep.Leader,
				cmp.Or(rep.Node, "-"), cmp.Or(rep.Image, "-"))
		}
	}
	return tw.Flush()
}

// oneLine cuts s to its first line and 120 characters, for a table cell.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
