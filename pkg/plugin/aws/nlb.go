package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// NLBName is the network type of the NLB plugin (OKG's name); NLBAlias its family (OKG's).
const (
	NLBName  = "AmazonWebServices-NLB"
	NLBAlias = "NLB-Network"
)

// Network-conf parameters of AmazonWebServices-NLB (OKG's names).
const (
	// ParamNLBARNs lists the ARNs of the NLBs to take listener ports on, comma-separated; the
	// first with room is taken.
	ParamNLBARNs = "NlbARNs"
	// ParamNLBVPCID is the VPC of the TargetGroups (spec.vpcID).
	ParamNLBVPCID = "NlbVPCId"
	// ParamNLBHealthCheck is the TargetGroups' health check, "<key>:<value>,..." with the
	// keys of HealthCheckKeys.
	ParamNLBHealthCheck = "NlbHealthCheck"
)

// Keys OKG's plugin writes (its names).
const (
	// AnnotationNLBARN names, on the Service and the TargetGroups, the NLB the pod's
	// listeners are on.
	AnnotationNLBARN = "service.beta.kubernetes.io/aws-load-balancer-nlb-arn"
	// AnnotationNLBPort is a TargetGroup's listener port on that NLB, in decimal.
	AnnotationNLBPort = "service.beta.kubernetes.io/aws-load-balancer-nlb-port"
	// LabelManagedBy is the label (and AWS tag) OKG puts on every object it writes, with
	// value ManagedByValue.
	LabelManagedBy = "managed-by"
	ManagedByValue = "game.kruise.io"
	// LabelTargetGroupSynced is "false" on a TargetGroup whose Listener and
	// TargetGroupBinding are still to be made and "true" once they are: OKG's TargetGroup
	// watcher acts on "false", so that a rollback to OKG finds its objects as it left them.
	LabelTargetGroupSynced = "aws-load-balancer-nlb-target-group-synced"
	// ConditionResourceSynced, ConditionTerminal and ConditionRecoverable are the ACK
	// controllers' status conditions: synced with AWS, a failure retrying will not mend, a
	// failure it retries.
	ConditionResourceSynced = "ACK.ResourceSynced"
	ConditionTerminal       = "ACK.Terminal"
	ConditionRecoverable    = "ACK.Recoverable"
)

// MaxTargetGroupNameLength is the longest name AWS gives a target group: 32 characters,
// letters, digits and hyphens (the Elastic Load Balancing API's CreateTargetGroup Name).
// OKG names a pod's target group "<pod>-<listener port>".
const MaxTargetGroupNameLength = 32

// The kinds the plugin writes: ACK's elbv2 controller's TargetGroup and Listener, and the
// AWS Load Balancer Controller's TargetGroupBinding.
var (
	TargetGroupGVK        = schema.GroupVersionKind{Group: "elbv2.services.k8s.aws", Version: "v1alpha1", Kind: "TargetGroup"}
	ListenerGVK           = schema.GroupVersionKind{Group: "elbv2.services.k8s.aws", Version: "v1alpha1", Kind: "Listener"}
	TargetGroupBindingGVK = schema.GroupVersionKind{Group: "elbv2.k8s.aws", Version: "v1beta1", Kind: "TargetGroupBinding"}
)

// HealthCheckKeys are NlbHealthCheck's keys, each with the TargetGroup spec field it sets
// and its kind: "bool", "int" or "string" (OKG's keys; the fields of ACK's TargetGroupSpec).
var HealthCheckKeys = map[string]string{
	"healthCheckEnabled":         "bool",
	"healthCheckIntervalSeconds": "int",
	"healthCheckPath":            "string",
	"healthCheckPort":            "string",
	"healthCheckProtocol":        "string",
	"healthCheckTimeoutSeconds":  "int",
	"healthyThresholdCount":      "int",
	"unhealthyThresholdCount":    "int",
}

// NLBSpec is AmazonWebServices-NLB for the load-balancer engine: ARNs in NlbARNs, the first
// NLB with room, the lowest free ports, ports named "<port>" (no TCPUDP), a ClusterIP
// Service labelled as OKG labels it with the Annotations parameter's entries, and per port
// the TargetGroup, Listener and TargetGroupBinding of serve. Exhausted ports are OKG's
// apiCallError.
func NLBSpec() lb.Spec {
	return lb.Spec{
		Name: NLBName, Alias: NLBAlias,
		IDsParam: ParamNLBARNs, IDAnnotation: AnnotationNLBARN, OwnedAnnotations: []string{AnnotationNLBARN},
		FirstFit: true, PortNames: lb.PortNamePlain, ServiceType: corev1.ServiceTypeClusterIP,
		Params:        []string{ParamNLBVPCID, ParamNLBHealthCheck, lb.ParamAnnotations},
		Customize:     customizeNLB,
		ExhaustedType: plugin.APICallError,
		Exhausted: func(ids []string, n int) string {
			return fmt.Sprintf("no NLB has %d enough available ports: %v", n, ids)
		},
		ExternalAddresses: externalNLB,
		Serve:             serve,
		ServeObjects:      []client.Object{object(TargetGroupGVK), object(ListenerGVK), object(TargetGroupBindingGVK)},
		Results: []plugin.ResultKind{
			{Object: object(TargetGroupGVK), Answer: ackAnswer, PodLabel: kubernetes.SelectorPodNameLabel},
			{Object: object(ListenerGVK), Answer: ackAnswer, PodLabel: kubernetes.SelectorPodNameLabel},
			{Object: object(TargetGroupBindingGVK), Answer: [][]string{{"status", "observedGeneration"}}, PodLabel: kubernetes.SelectorPodNameLabel},
		},
	}
}

// ackAnswer are the fields in which an ACK controller answers: the resource's ARN and its
// conditions.
var ackAnswer = [][]string{{"status", "ackResourceMetadata", "arn"}, {"status", "conditions"}}

// NewNLB returns the AmazonWebServices-NLB plugin handing out listener ports of rng
// ([aws.nlb]: max_port included, as in OKG).
func NewNLB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive = true
	return lb.New(NLBSpec(), rng)
}

// object is an empty unstructured object of gvk.
func object(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// customizeNLB writes what OKG's plugin writes on the Service besides the engine's fields:
// the labels managed-by and the pod name, and the Annotations parameter's entries. It checks
// the TargetGroup parameters too, so that a bad one fails before anything is made.
func customizeNLB(conf networkstatus.Conf, svc *corev1.Service) error {
	if _, err := targetGroupParams(conf); err != nil {
		return err
	}
	for _, sp := range svc.Spec.Ports {
		if err := targetGroupName(fmt.Sprintf("%s-%d", svc.Name, sp.Port)); err != nil {
			return err
		}
	}
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels[LabelManagedBy] = ManagedByValue
	svc.Labels[kubernetes.SelectorPodNameLabel] = svc.Name
	return lb.ApplyAnnotations(conf, svc)
}

// targetGroupName checks a pod's target group name, "<pod>-<listener port>", as AWS's
// CreateTargetGroup does: at most MaxTargetGroupNameLength characters, letters, digits and
// hyphens, not beginning or ending with a hyphen. Errors: a ParameterError naming the pod's
// metadata.name (OKG makes the object, and ACK reports AWS's refusal).
func targetGroupName(name string) error {
	ok := len(name) <= MaxTargetGroupNameLength && !strings.HasPrefix(name, "-") && !strings.HasSuffix(name, "-") &&
		strings.IndexFunc(name, notNameRune) < 0
	if !ok {
		return plugin.ParamErrorf("metadata.name", "the pod's target group name %q (\"<pod>-<listener port>\") is not one AWS accepts: at most %d letters, digits and hyphens, not beginning or ending with a hyphen; name the pod (its GameServerSet) shorter",
			name, MaxTargetGroupNameLength)
	}
	return nil
}

// notNameRune reports whether r may not be in a target group's name: anything but an ASCII
// letter, digit or hyphen.
func notNameRune(r rune) bool {
	isName := r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
	return !isName
}

// tgParams are the TargetGroup fields the network-conf sets: spec.vpcID and the health
// check's fields.
type tgParams struct {
	vpc         string
	healthCheck map[string]any
}

// targetGroupParams reads NlbVPCId and NlbHealthCheck. OKG skips a NlbHealthCheck entry
// without ':' and a value that is not a number where one is expected; here each is a
// ParameterError naming NlbHealthCheck, as is a key it does not know.
func targetGroupParams(conf networkstatus.Conf) (tgParams, error) {
	out := tgParams{healthCheck: map[string]any{}}
	out.vpc, _ = conf.Last(ParamNLBVPCID)
	for _, v := range conf.Values(ParamNLBHealthCheck) {
		for _, entry := range strings.Split(v, ",") {
			if strings.TrimSpace(entry) == "" {
				continue // a trailing comma, as OKG skips it
			}
			k, val, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok {
				return tgParams{}, plugin.ParamErrorf(ParamNLBHealthCheck, "entry %q has no ':', expected <key>:<value>", entry)
			}
			switch HealthCheckKeys[k] {
			case "bool":
				b, err := strconv.ParseBool(val)
				if err != nil {
					return tgParams{}, plugin.ParamErrorf(ParamNLBHealthCheck, "%s: %q is not a boolean, expected true or false", k, val)
				}
				out.healthCheck[k] = b
			case "int":
				n, err := strconv.ParseInt(val, 10, 32)
				if err != nil || n < 0 {
					return tgParams{}, plugin.ParamErrorf(ParamNLBHealthCheck, "%s: %q is not a number of 0 or more", k, val)
				}
				out.healthCheck[k] = n
			case "string":
				out.healthCheck[k] = val
			default:
				keys := slices.Sorted(func(yield func(string) bool) {
					for k := range HealthCheckKeys {
						if !yield(k) {
							return
						}
					}
				})
				return tgParams{}, plugin.ParamErrorf(ParamNLBHealthCheck, "unknown key %q, expected one of %s", k, strings.Join(keys, ", "))
			}
		}
	}
	return out, nil
}

// externalNLB is the external address of a Service port: the NLB's DNS name, which AWS
// derives from its ARN (OKG derives it the same way), with no IP.
func externalNLB(_ networkstatus.Conf, svc *corev1.Service, sp corev1.ServicePort) []networkstatus.NetworkAddress {
	return []networkstatus.NetworkAddress{{EndPoint: DNSName(svc.Annotations[AnnotationNLBARN]), Ports: []networkstatus.NetworkPort{
		{Name: strconv.Itoa(int(sp.TargetPort.IntVal)), Port: networkstatus.IntPort(sp.Port), Protocol: sp.Protocol}}}}
}

// DNSName is the DNS name AWS gives the NLB of arn
// ("arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/net/<name>/<id>"):
// "<name>-<id>.elb.<region>.amazonaws.com"; "" for an ARN not of that form.
func DNSName(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 {
		return ""
	}
	res := strings.Split(parts[5], "/")
	if len(res) != 4 || res[0] != "loadbalancer" || res[1] != "net" {
		return ""
	}
	return fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", res[2], res[3], parts[3])
}

// serve makes, for each port of the pod's Service, the TargetGroup "<pod>-<port>", then,
// once ACK reports the target group's ARN, the Listener forwarding the NLB's port to it and
// the TargetGroupBinding registering the pod (OKG makes these in its TargetGroup watcher;
// here the TargetGroup's answer runs the pod again). It removes the objects of ports the
// Service no longer has. The network is Ready when every Listener is synced with AWS and
// every TargetGroupBinding reconciled by the AWS Load Balancer Controller (its
// status.observedGeneration at its generation): the traffic can reach the pod. While the
// network is disabled the TargetGroupBindings are deleted, as OKG deletes them. Errors: the
// ACK controller's failure as a CloudError with its message; a ParameterError for a name AWS
// refuses or an object of the name this manager does not own; APICallErrors.
func serve(ctx context.Context, c client.Client, run lb.ServeRun) (bool, error) {
	svc := run.Service
	prm, err := targetGroupParams(run.Conf)
	if err != nil {
		return false, err
	}
	arn := svc.Annotations[AnnotationNLBARN]
	ready := true
	var errs []error
	keep := map[string]bool{}
	for _, sp := range svc.Spec.Ports {
		name := fmt.Sprintf("%s-%d", svc.Name, sp.Port)
		keep[name] = true // its name was checked with the Service (customizeNLB)
		o := objects{ctx: ctx, c: c, r: run.Reader, pod: run.Pod, svc: svc, name: name}
		if run.Disabled {
			// OKG deletes the bindings and nothing else: the pod leaves its target groups.
			errs = append(errs, o.remove(TargetGroupBindingGVK))
			continue
		}
		tg, err := o.ensure(targetGroup(svc, name, arn, sp, prm))
		if err != nil || tg == nil {
			ready, errs = false, append(errs, err)
			continue
		}
		tgARN, err := ackARN(TargetGroupGVK.Kind, tg)
		if err != nil || tgARN == "" {
			ready, errs = false, append(errs, err)
			continue
		}
		// The Listener and the binding need only the target group's ARN: both are made in
		// one run, and the TargetGroup is labelled synced then, as OKG's watcher labels it.
		l, lerr := o.ensure(listener(svc, name, arn, tgARN, sp))
		b, berr := o.ensure(binding(svc, name, tgARN, sp))
		if lerr == nil && berr == nil {
			lerr = o.markSynced(tg)
		}
		if lerr != nil || berr != nil || l == nil || b == nil {
			ready, errs = false, append(errs, lerr, berr)
			continue
		}
		lARN, err := ackARN(ListenerGVK.Kind, l)
		if err != nil || lARN == "" {
			ready, errs = false, append(errs, err)
			if _, message, _ := ackFailure(l); strings.Contains(message, "DuplicateListener") {
				// The NLB still has the listener of this port's last holder, which ACK is
				// deleting (its Listener object went with its pod): AWS refused this one for
				// good (a terminal error in ACK). It is made anew at a later run, once the
				// port is free in AWS too.
				errs = append(errs, o.remove(ListenerGVK))
			}
		}
		if created := b.GetCreationTimestamp(); created.Before(&run.Pod.CreationTimestamp) {
			// A Fixed game server's binding made for an earlier pod of the name: its
			// reconciled generation says nothing of this pod's registration. It is made anew.
			ready, errs = false, append(errs, o.remove(TargetGroupBindingGVK))
		} else if gen, _, _ := unstructured.NestedInt64(b.Object, "status", "observedGeneration"); gen < 1 || gen < b.GetGeneration() {
			ready = false
		}
	}
	if err := prune(ctx, c, run.Reader, run.Pod, svc, keep); err != nil {
		errs = append(errs, err)
	}
	return ready, errors.Join(errs...)
}

// targetGroup is the TargetGroup OKG writes for one Service port: the pod's port behind the
// NLB's, IP targets, the network-conf's VPC and health check, tagged managed-by.
func targetGroup(svc *corev1.Service, name, arn string, sp corev1.ServicePort, prm tgParams) *unstructured.Unstructured {
	u := owned(TargetGroupGVK, svc, name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, kubernetes.SelectorPodNameLabel: svc.Name, LabelTargetGroupSynced: "false"})
	u.SetAnnotations(map[string]string{AnnotationNLBARN: arn, AnnotationNLBPort: strconv.Itoa(int(sp.Port))})
	spec := map[string]any{
		"name": name, "port": int64(sp.TargetPort.IntVal), "protocol": string(sp.Protocol), "targetType": "ip",
		"vpcID": prm.vpc, "tags": managedTags(),
	}
	for k, v := range prm.healthCheck {
		spec[k] = v
	}
	u.Object["spec"] = spec
	return u
}

// listener is the Listener OKG writes for one Service port: the NLB's port, forwarding to the
// target group of tgARN.
func listener(svc *corev1.Service, name, arn, tgARN string, sp corev1.ServicePort) *unstructured.Unstructured {
	u := owned(ListenerGVK, svc, name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, kubernetes.SelectorPodNameLabel: svc.Name})
	u.Object["spec"] = map[string]any{
		"loadBalancerARN": arn, "port": int64(sp.Port), "protocol": string(sp.Protocol),
		"defaultActions": []any{map[string]any{"type": "forward", "targetGroupARN": tgARN}},
		"tags":           managedTags(),
	}
	return u
}

// binding is the TargetGroupBinding OKG writes for one Service port: the Service's port's
// endpoints (the pod) registered as IP targets of tgARN.
func binding(svc *corev1.Service, name, tgARN string, sp corev1.ServicePort) *unstructured.Unstructured {
	u := owned(TargetGroupBindingGVK, svc, name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, kubernetes.SelectorPodNameLabel: svc.Name})
	u.Object["spec"] = map[string]any{
		"serviceRef":     map[string]any{"name": svc.Name, "port": int64(sp.Port)},
		"targetGroupARN": tgARN, "targetType": "ip",
	}
	return u
}

func managedTags() []any {
	return []any{map[string]any{"key": LabelManagedBy, "value": ManagedByValue}}
}

// owned is an object of gvk and name in the Service's namespace with the Service's owners
// (the pod, or its GameServerSet when Fixed).
func owned(gvk schema.GroupVersionKind, svc *corev1.Service, name string) *unstructured.Unstructured {
	u := object(gvk)
	u.SetNamespace(svc.Namespace)
	u.SetName(name)
	u.SetOwnerReferences(svc.OwnerReferences)
	return u
}

// objects writes one port's objects of a run.
type objects struct {
	ctx  context.Context
	c    client.Client
	r    client.Reader
	pod  *corev1.Pod
	svc  *corev1.Service
	name string
}

// get reads the object of gvk and the port's name: nil when there is none.
func (o objects) get(gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u := object(gvk)
	switch err := o.r.Get(o.ctx, client.ObjectKey{Namespace: o.svc.Namespace, Name: o.name}, u); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case meta.IsNoMatchError(err):
		return nil, plugin.Errorf(plugin.APICallError, "the API server does not serve %s (%s): install the CRDs of %s", gvk.Kind, gvk.GroupVersion(), controllerOf(gvk))
	case err != nil:
		return nil, plugin.WrapUnknown(err, "get %s %s/%s", gvk.Kind, o.svc.Namespace, o.name)
	}
	return u, nil
}

// controllerOf names the controller that serves gvk.
func controllerOf(gvk schema.GroupVersionKind) string {
	if gvk.Group == TargetGroupBindingGVK.Group {
		return "the AWS Load Balancer Controller"
	}
	return "the ACK elbv2 controller"
}

// ensure makes want stand: created when missing, its spec brought back to want when it
// differs (a network-conf change, an edit). A spec field AWS cannot change in place (a
// TargetGroup's port, protocol, VPC or target type, and then its Listener and binding go
// first; a binding's target group; a Listener's NLB) makes the object go, to be made anew at
// a later run. It returns the object as it stands, nil while
// it is being made or replaced, or while an earlier pod's of the name is still there.
// Errors: a ParameterError for an object of the name this manager does not own;
// APICallErrors.
func (o objects) ensure(want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := want.GroupVersionKind()
	have, err := o.get(gvk)
	if err != nil {
		return nil, err
	}
	if have == nil {
		switch err := o.c.Create(o.ctx, want); {
		case apierrors.IsAlreadyExists(err):
			return nil, nil // made meanwhile by another run; the cache shows it at the next
		case err != nil:
			return nil, plugin.Wrap(plugin.APICallError, err, "create %s %s/%s", gvk.Kind, want.GetNamespace(), want.GetName())
		}
		ctrl.LoggerFrom(o.ctx).Info("Created", "kind", gvk.Kind, "name", want.GetName())
		return nil, nil
	}
	if !o.ours(have) {
		for _, ref := range have.GetOwnerReferences() {
			if ref.Kind == "Pod" && ref.Name == o.pod.Name && ref.UID != o.pod.UID {
				return nil, nil // an earlier pod's of this name: it goes with that pod
			}
		}
		return nil, plugin.Errorf(plugin.ParameterError, "%s %s/%s exists and is not managed by network-plugin-policy", gvk.Kind, have.GetNamespace(), have.GetName())
	}
	if have.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	spec, _, _ := unstructured.NestedMap(have.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	owners := equality.Semantic.DeepEqual(have.GetOwnerReferences(), want.GetOwnerReferences())
	if owners && covers("spec", spec, wantSpec) {
		return have, nil
	}
	if replaced(gvk, spec, wantSpec) {
		if gvk == TargetGroupGVK {
			// AWS refuses to delete a target group a listener forwards to: the port's
			// binding and Listener go first.
			if err := errors.Join(o.remove(TargetGroupBindingGVK), o.remove(ListenerGVK)); err != nil {
				return nil, err
			}
		}
		if err := o.c.Delete(o.ctx, have, client.Preconditions{UID: ptr.To(have.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return nil, plugin.Wrap(plugin.APICallError, err, "delete %s %s/%s to make it anew", gvk.Kind, have.GetNamespace(), have.GetName())
		}
		ctrl.LoggerFrom(o.ctx).Info("Deleted, to be made anew: a field AWS cannot change in place differs", "kind", gvk.Kind, "name", have.GetName())
		return nil, nil
	}
	before := have.DeepCopy()
	// The owners follow the Service's (Fixed turned on or off); the spec is brought back
	// to want where it is not covered, the controllers' own fields kept.
	have.SetOwnerReferences(want.GetOwnerReferences())
	for k := range spec {
		if _, ok := wantSpec[k]; !ok && gvk == TargetGroupGVK && HealthCheckKeys[k] != "" {
			delete(spec, k) // a health check field the network-conf no longer sets
		}
	}
	for k, v := range wantSpec {
		if !covers(k, spec[k], v) {
			spec[k] = v
		}
	}
	have.Object["spec"] = spec
	if err := o.c.Patch(o.ctx, have, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil, plugin.WrapUnknown(err, "patch %s %s/%s", gvk.Kind, have.GetNamespace(), have.GetName())
		}
		return nil, plugin.WrapWriteRefused(err, "patch %s %s/%s", gvk.Kind, have.GetNamespace(), have.GetName())
	}
	ctrl.LoggerFrom(o.ctx).Info("Updated", "kind", gvk.Kind, "name", have.GetName())
	if owners {
		return nil, nil // ACK and the Load Balancer Controller answer the new spec
	}
	return have, nil // only the owners changed
}

// ours reports whether u is the pod's object of its kind and name: labelled managed-by (as
// this manager and OKG label theirs) and owned by the pod itself or by one of its Service's
// owners (its GameServerSet when Fixed). An object the pod's author could make in the
// namespace passes that test too; it is the pod's own namespace and name, so it changes
// nothing of anyone else's.
func (o objects) ours(u *unstructured.Unstructured) bool {
	if u.GetLabels()[LabelManagedBy] != ManagedByValue {
		return false
	}
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "Pod" && ref.UID == o.pod.UID {
			return true
		}
		for _, want := range o.svc.OwnerReferences {
			if ref.UID == want.UID && ref.Kind == want.Kind {
				return true
			}
		}
	}
	return false
}

// markSynced sets tg's LabelTargetGroupSynced to "true" once its Listener and binding are
// made, as OKG's watcher does.
func (o objects) markSynced(tg *unstructured.Unstructured) error {
	if tg.GetLabels()[LabelTargetGroupSynced] == "true" {
		return nil
	}
	before := tg.DeepCopy()
	labels := tg.GetLabels()
	labels[LabelTargetGroupSynced] = "true"
	tg.SetLabels(labels)
	if err := o.c.Patch(o.ctx, tg, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return plugin.WrapWriteRefused(err, "label TargetGroup %s/%s %s=true", tg.GetNamespace(), tg.GetName(), LabelTargetGroupSynced)
	}
	return nil
}

// remove deletes the port's object of gvk when it is this manager's.
func (o objects) remove(gvk schema.GroupVersionKind) error {
	u, err := o.get(gvk)
	if err != nil || u == nil || !o.ours(u) || u.GetDeletionTimestamp() != nil {
		return err
	}
	if err := o.c.Delete(o.ctx, u, client.Preconditions{UID: ptr.To(u.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return plugin.Wrap(plugin.APICallError, err, "delete %s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName())
	}
	ctrl.LoggerFrom(o.ctx).Info("Deleted", "kind", gvk.Kind, "name", u.GetName())
	return nil
}

// prune deletes this manager's TargetGroups, Listeners and TargetGroupBindings of the pod
// (label statefulset.kubernetes.io/pod-name, the Service's owners) whose port the Service no
// longer has (keep: the names of its ports' objects).
func prune(ctx context.Context, c client.Client, r client.Reader, pod *corev1.Pod, svc *corev1.Service, keep map[string]bool) error {
	var errs []error
	for _, gvk := range []schema.GroupVersionKind{TargetGroupBindingGVK, ListenerGVK, TargetGroupGVK} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, client.InNamespace(svc.Namespace), client.MatchingLabels{LabelManagedBy: ManagedByValue, kubernetes.SelectorPodNameLabel: svc.Name}); err != nil {
			if !meta.IsNoMatchError(err) {
				errs = append(errs, plugin.WrapUnknown(err, "list %s of %s/%s", gvk.Kind, svc.Namespace, svc.Name))
			}
			continue
		}
		for i := range list.Items {
			u := &list.Items[i]
			if keep[u.GetName()] {
				continue
			}
			o := objects{ctx: ctx, c: c, r: r, pod: pod, svc: svc, name: u.GetName()}
			if !o.ours(u) || u.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.Delete(ctx, u, client.Preconditions{UID: ptr.To(u.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, plugin.Wrap(plugin.APICallError, err, "delete %s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName()))
				continue
			}
			ctrl.LoggerFrom(ctx).Info("Deleted: the Service no longer has its port", "kind", gvk.Kind, "name", u.GetName())
		}
	}
	return errors.Join(errs...)
}

// caseless are the spec fields whose values AWS writes back in its own case (enums such as
// "TCP", "HTTP", "ip"): compared without case.
var caseless = map[string]bool{"protocol": true, "healthCheckProtocol": true, "targetType": true, "type": true}

// covers reports whether have, the value of field key as it stands, holds want: a map every
// key of want (a key want leaves an empty string is not set, and the controller's value
// stands), a list each element of want (in any order: AWS's tags and actions come back as
// AWS lists them, with fields of its own), a number the same number, a string the same
// string (without case for the caseless fields). The controllers write what AWS returns into
// the spec; only what the plugin asks for is compared, so that their additions never make the
// plugin write again (a patch loop against the controller).
func covers(key string, have, want any) bool {
	switch w := want.(type) {
	case string:
		h, ok := have.(string)
		return w == "" || (ok && (h == w || (caseless[key] && strings.EqualFold(h, w))))
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !covers(k, h[k], wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			if !slices.ContainsFunc(h, func(hv any) bool { return covers(key, hv, wv) }) {
				return false
			}
		}
		return true
	}
	return equalJSON(have, want)
}

// replaced reports whether a spec field that AWS cannot change in place differs.
func replaced(gvk schema.GroupVersionKind, have, want map[string]any) bool {
	var fields []string
	switch gvk {
	case TargetGroupGVK:
		fields = []string{"name", "port", "protocol", "targetType", "vpcID"}
	case TargetGroupBindingGVK:
		fields = []string{"targetGroupARN", "targetType"}
	case ListenerGVK:
		fields = []string{"loadBalancerARN"}
	}
	for _, f := range fields {
		if !covers(f, have[f], want[f]) {
			return true
		}
	}
	return false
}

// equalJSON compares two values of decoded JSON, numbers by value whatever their Go type.
func equalJSON(a, b any) bool {
	return equality.Semantic.DeepEqual(normalize(a), normalize(b))
}

func normalize(v any) any {
	switch t := v.(type) {
	case int:
		return int64(t)
	case int32:
		return int64(t)
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	}
	return v
}

// ackARN reads an ACK resource's answer: its ARN (status.ackResourceMetadata.arn), which ACK
// writes once the resource exists in AWS; "" while it does not. A resource with an ARN exists
// whatever its conditions say next: ACK sets ACK.ResourceSynced False ("Resource not synced")
// at every reconcile that has work to do, and ACK.Recoverable True on a throttled call, and
// neither takes the resource away, so a Ready network stays Ready. Without an ARN, a True
// ACK.Terminal or ACK.Recoverable is the run's CloudError with the controller's message ("no
// message" without one; OKG's watcher panics on a failure without a message), reason
// QuotaExceeded for AWS's TooMany* refusals (the NLB's 50 listeners, the account's target
// groups), CloudRefused for the others; a False ACK.ResourceSynced is waited on.
func ackARN(kind string, u *unstructured.Unstructured) (string, error) {
	if arn, _, _ := unstructured.NestedString(u.Object, "status", "ackResourceMetadata", "arn"); arn != "" {
		return arn, nil
	}
	if typ, message, failed := ackFailure(u); failed {
		if message == "" {
			message = "no message"
		}
		e := plugin.Errorf(plugin.CloudError, "ACK elbv2 controller: %s %s/%s %s: %s", kind, u.GetNamespace(), u.GetName(), typ, message)
		e.Reason = plugin.ReasonCloudRefused
		if strings.Contains(message, "TooMany") {
			e.Reason = plugin.ReasonQuotaExceeded
		}
		return "", e
	}
	return "", nil
}

// ackFailure returns the first True ACK.Terminal or ACK.Recoverable condition of u: its type
// and message (the reason too when it has one, as "<reason>: <message>").
func ackFailure(u *unstructured.Unstructured) (typ, message string, failed bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		t, _ := cond["type"].(string)
		status, _ := cond["status"].(string)
		if (t != ConditionTerminal && t != ConditionRecoverable) || status != string(metav1.ConditionTrue) {
			continue
		}
		message, _ = cond["message"].(string)
		if reason, _ := cond["reason"].(string); reason != "" && !strings.Contains(message, reason) {
			message = strings.TrimSuffix(reason+": "+message, ": ")
		}
		return t, message, true
	}
	return "", "", false
}
