package pod

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// Path is the URL path the webhook serves, as in config/webhook/manifests.yaml.
const Path = "/mutate-v1-pod"

// AnnotationTraceparent is OpenKruise Game's tracing annotation, set by its controllers to link
// the webhook's trace to a reconcile; like upstream's webhook, this one removes it from the
// admitted pod so it never persists.
const AnnotationTraceparent = "game.kruise.io/traceparent"

// AnnotationDecision is written on every admitted pod (CREATE, UPDATE): the failure mode in
// force for its plugin and the policy that supplied it, for example
// "Asynchronous by policy game-prod/lobby@3" or "Synchronous by built-in default", so that
// `kubectl get pod -o yaml` shows which policy governs the pod's network.
const AnnotationDecision = "policy.game.kruise.io/network-decision"

// builtInDefault names the built-in defaults in messages, when no policy supplied a group.
const builtInDefault = networkretry.BuiltInDefault

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create;update;delete,versions=v1,name=mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=30,reinvocationPolicy=Never

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Handler is the mutating pod admission handler. Every field but Clock is required.
type Handler struct {
	// Client is what plugins use to read and write cluster objects (Services, Nodes, ...).
	Client client.Client
	// Namespaces reads Namespace objects for namespaceSelector and the CEL variable
	// namespaceObject; the manager's cached client.
	Namespaces client.Reader
	// Plugins are the registered network plugins.
	Plugins *plugin.Registry
	// Resolver decides the failure mode, timeout, readiness gate and retry schedule.
	Resolver *policy.Resolver
	// Recorder records a Warning event on the pod for every plugin error.
	Recorder events.EventRecorder
	// Metrics are the webhook's metrics.
	Metrics *Metrics
	// Decoder decodes pods from admission requests.
	Decoder admission.Decoder
	// Clock gives the time written to network-status and the retry state; nil means the
	// real clock.
	Clock clock.PassiveClock
	// MaxTimeout caps the plugin deadline of a Decision: the webhook configuration's
	// timeoutSeconds less a margin for the rest of the request, so that the webhook answers
	// (deny, or admit NotReady, as the policy says) before the apiserver gives up on it and
	// applies failurePolicy Fail to the pod. Zero means no cap.
	MaxTimeout time.Duration
}

var _ admission.Handler = (*Handler)(nil)

// outcome is the result of one request, for the response, the metrics and the log.
type outcome struct {
	mode     policyv1alpha1.FailureMode
	result   string
	warnings []string
}

// Handle runs the network plugin for one pod admission request; see the package comment.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	op := plugin.Operation(req.Operation)
	log := ctrl.LoggerFrom(ctx).WithName("pod-webhook").WithValues("operation", op, "pod", klog.KRef(req.Namespace, req.Name))
	ctx = ctrl.LoggerInto(ctx, log)

	pod, old, err := h.decode(req)
	if err != nil {
		h.Metrics.Decisions.WithLabelValues("", string(op), "", OutcomeErrored).Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	if networkType == "" {
		// The webhook configuration's matchConditions keep such pods away; allow them anyway.
		return admission.Allowed("pod has no " + networkstatus.AnnotationNetworkType + " annotation")
	}

	resp, out := h.handle(ctx, req, op, pod, old, networkType)
	h.Metrics.Decisions.WithLabelValues(networkType, string(op), string(out.mode), out.result).Inc()
	return resp.WithWarnings(out.warnings...)
}

// handle does the work of Handle for a pod with a network type.
func (h *Handler) handle(ctx context.Context, req admission.Request, op plugin.Operation, pod, old *corev1.Pod,
	networkType string) (admission.Response, outcome) {
	log := ctrl.LoggerFrom(ctx)
	p, lookupErr := h.Plugins.Lookup(networkType)
	// An unknown network type is a plugin error like any other; with no policy it denies
	// (upstream silently skips it, and the pod runs without its network).
	desc := policy.Plugin{Name: networkType, Synchronous: true}
	if p != nil {
		desc = policy.Plugin{Name: p.Name(), Alias: p.Alias(), Synchronous: p.IsSynchronous()}
	}
	in := policy.Input{
		Pod:       pod,
		OldPod:    old,
		Namespace: h.namespace(ctx, pod.Namespace),
		Request:   policy.RequestInfo{Operation: string(op), UserInfo: req.UserInfo, DryRun: req.DryRun != nil && *req.DryRun},
		Plugin:    desc,
	}
	decision, err := h.Resolver.Resolve(ctx, in)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("resolve network plugin policy: %w", err)),
			outcome{result: OutcomeErrored}
	}

	var warnings []string
	mutated := pod.DeepCopy()
	var perr *plugin.Error
	switch {
	case lookupErr != nil:
		perr = plugin.AsError(lookupErr)
	case in.Request.DryRun:
		// A dry run must have no side effects; plugins allocate ports and create Services.
		warnings = append(warnings, fmt.Sprintf("dry run: network plugin %s was not run", networkType))
	default:
		start := time.Now()
		timeout := decision.Timeout
		if h.MaxTimeout > 0 && timeout > h.MaxTimeout {
			log.V(1).Info("Plugin timeout capped below the webhook's own timeout", "policyTimeout", timeout, "timeout", h.MaxTimeout)
			timeout = h.MaxTimeout
		}
		mutated, err = plugin.Run(ctx, timeout, p, op, h.Client, pod)
		perr = plugin.AsError(err)
		result := "success"
		if perr != nil {
			result = string(perr.Type)
		}
		h.Metrics.PluginDuration.WithLabelValues(networkType, string(op), result).Observe(time.Since(start).Seconds())
	}

	if perr != nil {
		msg := errorText(perr)
		in.Error = &policy.PluginError{Type: string(perr.Type), Message: msg}
		if decision, err = h.Resolver.Resolve(ctx, in); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("resolve network plugin policy: %w", err)),
				outcome{result: OutcomeErrored}
		}
		failure := describe(decision.Explanation.Failure)
		if decision.Mode == policyv1alpha1.FailureModeSynchronous && op == plugin.OperationUpdate && retryBookkeepingOnly(old, pod) {
			// The update only stamps a retry or writes retry state (the network controller):
			// denying it would protect nothing, the pod exists already, and would stop the
			// retries and the exhausted action for good.
			failure += " (its Synchronous mode does not apply to a retry update)"
			decision.Mode = policyv1alpha1.FailureModeAsynchronous
		}
		log.Info("Network plugin failed", "plugin", networkType, "errorType", perr.Type, "error", msg,
			"mode", decision.Mode, "policy", failure, "explanation", decision.Explanation.String())
		if !in.Request.DryRun {
			h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, string(perr.Type), string(op),
				"Network plugin %s failed (%s): %s; %s by %s", networkType, perr.Type, msg,
				modeVerb(decision.Mode), failure)
		}
		if decision.Mode == policyv1alpha1.FailureModeSynchronous {
			return admission.Denied(fmt.Sprintf("network plugin %s failed (%s): %s; denied by %s (Synchronous)",
				networkType, perr.Type, msg, failure)), outcome{mode: decision.Mode, result: OutcomeDenied, warnings: warnings}
		}
		warnings = append(warnings, fmt.Sprintf("network plugin %s failed (%s): %s; admitted with network NotReady by %s, retried for %s",
			networkType, perr.Type, msg, failure, decision.Retry.Window))
	}
	out := outcome{mode: decision.Mode, result: OutcomeAllowed, warnings: warnings}
	if perr != nil {
		out.result = OutcomeAdmittedNotReady
	}
	if op == plugin.OperationDelete {
		return admission.Allowed(""), out
	}

	now := h.now()
	if perr != nil {
		if err := markNotReady(mutated, pod, networkType, now); err != nil {
			return admission.Errored(http.StatusInternalServerError, err), outcome{mode: decision.Mode, result: OutcomeErrored}
		}
	}
	if op == plugin.OperationCreate && decision.ReadinessGate {
		addReadinessGate(mutated)
	}
	if err := recordRetry(ctx, mutated, pod, networkType, perr, decision, now); err != nil {
		return admission.Errored(http.StatusInternalServerError, err), outcome{mode: decision.Mode, result: OutcomeErrored}
	}
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	delete(mutated.Annotations, AnnotationTraceparent)
	mutated.Annotations[AnnotationDecision] = fmt.Sprintf("%s by %s", decision.Mode, describe(decision.Explanation.Failure))

	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode mutated pod: %w", err)),
			outcome{mode: decision.Mode, result: OutcomeErrored}
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	resp.AuditAnnotations = map[string]string{
		"failure-policy": describe(decision.Explanation.Failure),
		"decision":       decision.Explanation.String(),
	}
	return resp, out
}

// decode returns the pod of the request (for DELETE, the pod being deleted) and, for UPDATE,
// the pod before the change.
func (h *Handler) decode(req admission.Request) (pod, old *corev1.Pod, err error) {
	pod = &corev1.Pod{}
	switch req.Operation {
	case admissionv1.Delete:
		if err := h.Decoder.DecodeRaw(req.OldObject, pod); err != nil {
			return nil, nil, fmt.Errorf("decode the pod being deleted: %w", err)
		}
		return pod, nil, nil
	case admissionv1.Update:
		old = &corev1.Pod{}
		if err := h.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return nil, nil, fmt.Errorf("decode the pod before the update: %w", err)
		}
	}
	if err := h.Decoder.DecodeRaw(req.Object, pod); err != nil {
		return nil, nil, fmt.Errorf("decode pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, old, nil
}

// namespace returns the pod's Namespace, or nil when it cannot be read (policies then see the
// namespace name only, and a namespaceSelector no labels); the error is logged.
func (h *Handler) namespace(ctx context.Context, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	if err := h.Namespaces.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot read the pod's namespace; policies see its name only", "namespace", name)
		return nil
	}
	return ns
}

func (h *Handler) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}

// markNotReady sets the mutated pod's network-status to NotReady after a plugin failure,
// keeping what the plugin wrote (addresses) and the times of the status the pod came with.
func markNotReady(mutated, in *corev1.Pod, networkType string, now time.Time) error {
	prev, _ := networkstatus.StatusFromPod(in) // a malformed status is replaced
	st, err := networkstatus.StatusFromPod(mutated)
	if err != nil || st == nil {
		st = &networkstatus.NetworkStatus{}
	}
	st.CurrentNetworkState = networkstatus.NetworkNotReady
	if st.DesiredNetworkState == "" {
		st.DesiredNetworkState = networkstatus.NetworkReady
	}
	st.NetworkType = networkType
	return networkstatus.SetStatus(mutated, prev, *st, now)
}

// recordRetry writes the retry state to the mutated pod when its network is not Ready after
// the plugin ran, counting on from the state the pod came with, with the Decision's schedule.
// A Ready network leaves the state for the network controller to clear (it emits
// NetworkReady with the time it took).
func recordRetry(ctx context.Context, mutated, in *corev1.Pod, networkType string, perr *plugin.Error,
	decision policy.Decision, now time.Time) error {
	if st, err := networkstatus.StatusFromPod(mutated); err == nil && st != nil && st.CurrentNetworkState == networkstatus.NetworkReady {
		return nil
	}
	prev, err := networkretry.FromPod(in)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Replacing a malformed retry state")
		prev = nil
	}
	var rerr *networkretry.Error
	if perr != nil {
		rerr = &networkretry.Error{Type: string(perr.Type), Message: errorText(perr)}
	}
	r := decision.Retry
	source := builtInDefault
	if p := decision.Explanation.Retry.Policy; p != nil {
		source = p.String()
	}
	state := networkretry.Record(prev, now, networkType, source, rerr,
		r.Window, r.Interval, r.MaxInterval, r.ExhaustedAction)
	v, err := state.Encode()
	if err != nil {
		return err
	}
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	mutated.Annotations[networkretry.Annotation] = v
	return nil
}

// addReadinessGate adds the readiness gate game.kruise.io/network-ready unless present.
func addReadinessGate(pod *corev1.Pod) {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == policyv1alpha1.ReadinessGateNetworkReady {
			return
		}
	}
	pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: policyv1alpha1.ReadinessGateNetworkReady})
}

// describe names the source of a Decision group: "policy <namespace>/<name>@<generation>" or
// "built-in default".
func describe(s policy.Source) string {
	if s.Policy == nil {
		return builtInDefault
	}
	return "policy " + s.Policy.String()
}

// retryBookkeepingOnly reports whether an UPDATE changes nothing but the annotations the
// network controller writes: game.kruise.io/network-trigger-time and the retry state.
func retryBookkeepingOnly(old, pod *corev1.Pod) bool {
	if old == nil || !equality.Semantic.DeepEqual(old.Spec, pod.Spec) || !maps.Equal(old.Labels, pod.Labels) {
		return false
	}
	changed := false
	for _, m := range []map[string]string{old.Annotations, pod.Annotations} {
		for k := range m {
			if k == networkstatus.AnnotationNetworkTriggerTime || k == networkretry.Annotation {
				continue
			}
			if old.Annotations[k] != pod.Annotations[k] {
				changed = true
			}
		}
	}
	return !changed
}

// errorText is the plugin error without its type: the parameter at fault, the message and
// the cause, as users read it in denials, warnings, events and the retry state.
func errorText(e *plugin.Error) string {
	return strings.TrimPrefix(e.Error(), string(e.Type)+": ")
}

func modeVerb(m policyv1alpha1.FailureMode) string {
	if m == policyv1alpha1.FailureModeSynchronous {
		return "denied"
	}
	return "admitted NotReady"
}
