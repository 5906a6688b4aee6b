package pod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
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

// WarningPrefix begins every admission warning the webhook returns about a plugin's run
// ("network plugin <name> failed (<type>): ...", "network plugin <name> warns (<type>): ...");
// a client whose writes trigger the runs (the network controller's trigger stamps) can tell
// them from the API server's own warnings by it.
const WarningPrefix = "network plugin "

// ReasonNetworkPluginWarning is the reason of the Warning event recorded when a plugin did
// its work but warns (an unknown network-conf parameter, say): at CREATE and at an UPDATE
// that changes network-type, network-conf or container ports.
const ReasonNetworkPluginWarning = "NetworkPluginWarning"

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Handler is the mutating pod admission handler. Every field but Clock is required.
type Handler struct {
	// StepBack, when set and true for a pod's network type, makes the webhook pass the pod
	// through untouched, with the reason as an admission warning: kruise-game-manager still
	// runs the plugins of the type's provider (okgguard.Guard.StepBack).
	StepBack func(networkType string) (bool, string)
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
	// AuditRecorder takes the Audit policies' would-be decisions for their status.audit
	// (a *policyaudit.Recorder); nil records none (the metric and the log lines still do).
	// A dry-run admission records nothing: it must have no side effects.
	AuditRecorder AuditSink
	// Metrics are the webhook's metrics.
	Metrics *Metrics
	// Decoder decodes pods from admission requests.
	Decoder admission.Decoder
	// Clock gives the time written to network-status and the retry state; nil means the
	// real clock.
	Clock clock.PassiveClock
	// ManagerUsername is the username of the manager's own requests (its ServiceAccount,
	// system:serviceaccount:<namespace>:<name>): an UPDATE it makes may change the
	// annotations under OwnedAnnotationPrefix (the network controller's exhausted mark); from
	// anyone else such a change is reverted. Empty: nobody's change is kept.
	ManagerUsername string
	// MinRetryInterval is the platform's floor on retry intervals (the network controller's
	// Options.MinRetryInterval): the stored retry state's schedule is raised to it before a
	// run's lateness is judged (networkretry.Record's paused time), since the controller
	// triggers runs on the floored schedule. Zero means no floor.
	MinRetryInterval time.Duration
	// MaxTimeout caps the plugin deadline of a Decision: the webhook configuration's
	// timeoutSeconds less a margin for the rest of the request, so that the webhook answers
	// (deny, or admit NotReady, as the policy says) before the apiserver gives up on it and
	// applies failurePolicy Fail to the pod. Zero means no cap.
	MaxTimeout time.Duration

	// diffWholePod makes every patch a diff of the whole pod (admission.PatchResponseFromRaw)
	// instead of the operations built from the fields the webhook and the plugins change;
	// the benchmarks' baseline.
	diffWholePod bool
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
		h.Metrics.Decisions.WithLabelValues(plugin.UnknownMetricLabel, string(op), "", OutcomeErrored).Inc()
		if op == plugin.OperationDelete {
			// A DELETE is never denied, not even one this webhook cannot read.
			log.Error(err, "Cannot decode the pod being deleted; allowed")
			return admission.Allowed("")
		}
		return admission.Errored(http.StatusBadRequest, err)
	}
	// The pod's UID (empty at CREATE: the API server sets it after admission) joins this
	// request's log lines to the network controller's, which log the same keys.
	log = log.WithValues("podUID", pod.UID)
	ctx = ctrl.LoggerInto(ctx, log)
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	if networkType == "" {
		// The webhook configuration's matchConditions send such a pod only when the request
		// brings, changes or removes one of the manager's own annotations: they are put back
		// (an UPDATE that drops the network type while it forges a retry state, then puts
		// the type back, must not step around the revert).
		return h.passThrough(ctx, req, op, pod, old, "pod has no "+networkstatus.AnnotationNetworkType+" annotation")
	}
	// The metrics' plugin label is a registered name or "unknown", never the raw value: a
	// pod author chooses it.
	label := h.Plugins.MetricLabel(networkType)
	if h.StepBack != nil {
		if back, why := h.StepBack(networkType); back {
			// kruise-game-manager still runs the plugins of this type's provider (okgguard):
			// two allocators for one pod would hand out conflicting ports, so this manager
			// leaves the pods of those types to it.
			h.Metrics.Decisions.WithLabelValues(label, string(op), "", OutcomePassedThrough).Inc()
			return h.passThrough(ctx, req, op, pod, old, "left to kruise-game-manager: "+why).
				WithWarnings("network-plugin-policy passed this pod through untouched: " + why)
		}
	}
	p, registered := h.Plugins.Get(networkType)
	if !registered {
		if _, nearMiss := h.Plugins.NearMiss(networkType); !nearMiss {
			// Not this manager's network type (OKG's own webhook owns its cloud types, such as
			// AlibabaCloud-SLB): admitted untouched, as OKG's webhook admits a type it has no
			// plugin for, but for the manager's own annotations.
			log.V(1).Info("Network type has no plugin here; passed through untouched", "networkType", networkType)
			h.Metrics.Decisions.WithLabelValues(label, string(op), "", OutcomePassedThrough).Inc()
			return h.passThrough(ctx, req, op, pod, old, "network type "+networkType+" has no plugin in this manager: passed through")
		}
		// A near-miss of a registered name (kubernetes-hostport, Kubernetes-HostPrt): a
		// parameterError decided by the policy, see handle.
	}
	if op == plugin.OperationUpdate && pod.DeletionTimestamp != nil {
		// A pod on its way out keeps its network as it is until it is gone (its players
		// drain); the plugin is not run.
		h.Metrics.Decisions.WithLabelValues(label, string(op), "", OutcomeAllowed).Inc()
		return admission.Allowed("pod is terminating: its network is left as it is")
	}

	var resp admission.Response
	var out outcome
	if op == plugin.OperationDelete {
		resp, out = h.handleDelete(ctx, networkType)
	} else {
		resp, out = h.handle(ctx, req, op, pod, old, p, networkType)
	}
	h.Metrics.Decisions.WithLabelValues(label, string(op), string(out.mode), out.result).Inc()
	return resp.WithWarnings(out.warnings...)
}

// predictionFor returns ctx, marked plugin.WithoutPrediction when the pod's stored retry
// state st (nil: none, or malformed)'s last failure was predicted from the caches (FromCache) and its window's end has
// come: the run that may close the window has the API server answer, so that no window
// closes on a prediction, however often other pods' refusals keep the caches' prediction
// confirmed.
func predictionFor(ctx context.Context, st *networkretry.State, pod *corev1.Pod, now time.Time) context.Context {
	if st == nil || st.LastError == nil || !st.LastError.FromCache {
		return ctx
	}
	if deadline, scheduled := st.DeadlineFor(pod); scheduled && !now.Before(deadline) {
		return plugin.WithoutPrediction(ctx)
	}
	return ctx
}

// passThrough allows a CREATE or UPDATE that no plugin runs for (no network type, a type
// without a plugin, or a manager stepping back for kruise-game-manager) with reason as its
// message, untouched but for the manager's own annotations (OwnedAnnotationPrefix): a
// request by anyone but the manager that brings, changes or removes one gets it put back as
// protectOwned says (dropped at CREATE, the stored value at UPDATE), with a warning naming
// the keys, so that what the manager acts on later is what it wrote.
func (h *Handler) passThrough(ctx context.Context, req admission.Request, op plugin.Operation, pod, old *corev1.Pod, reason string) admission.Response {
	if op != plugin.OperationCreate && op != plugin.OperationUpdate {
		return admission.Allowed(reason) // a DELETE is never patched
	}
	_, reverted := protectOwned(pod, old, op, byManager(h.ManagerUsername, req))
	res := admission.Allowed(reason)
	if len(reverted) == 0 {
		return res
	}
	ctrl.LoggerFrom(ctx).Info("Annotations owned by the manager were changed by the request; put back", "annotations", reverted, "user", req.UserInfo.Username)
	var was map[string]string
	if old != nil && op == plugin.OperationUpdate {
		was = old.Annotations
	}
	res.Patches = revertAnnotations(pod.Annotations, was, reverted)
	pt := admissionv1.PatchTypeJSONPatch
	res.PatchType = &pt
	return res.WithWarnings(ownedWarning(op, reverted))
}

// input is the policy input of a request.
func (h *Handler) input(ctx context.Context, req admission.Request, op plugin.Operation, pod, old *corev1.Pod, p plugin.Plugin, networkType string) policy.Input {
	// A near-miss of a registered name (p is nil: types that are neither registered nor a
	// near-miss never get here) is a plugin error like any other, of a plugin named as the
	// pod spells it: policies that list that exact spelling or "*" decide it, and with no
	// policy it denies (built-in Synchronous).
	desc := policy.Plugin{Name: networkType, Synchronous: true}
	if p != nil {
		desc = policy.Plugin{Name: p.Name(), Alias: p.Alias(), Synchronous: p.IsSynchronous()}
	}
	ns := h.namespace(ctx, pod.Namespace)
	return policy.Input{
		Pod:              pod,
		OldPod:           old,
		Namespace:        ns,
		NamespaceUnknown: ns == nil,
		Request:          policy.RequestInfo{Operation: string(op), UserInfo: req.UserInfo, DryRun: req.DryRun != nil && *req.DryRun},
		Plugin:           desc,
	}
}

// run runs the plugin with client c under timeout, capped at MaxTimeout, and observes its
// duration. It
// returns the pod as the plugin left it (a copy of pod when the plugin returned none), the
// plugin's failure (nil when it did its work) and its warnings (plugin.Split).
func (h *Handler) run(ctx context.Context, c client.Client, p plugin.Plugin, op plugin.Operation, pod *corev1.Pod,
	timeout time.Duration) (*corev1.Pod, *plugin.Error, []*plugin.Error) {
	start := time.Now()
	if h.MaxTimeout > 0 && timeout > h.MaxTimeout {
		ctrl.LoggerFrom(ctx).V(1).Info("Plugin timeout capped below the webhook's own timeout", "policyTimeout", timeout, "timeout", h.MaxTimeout)
		timeout = h.MaxTimeout
	}
	mutated, err := plugin.Run(ctx, timeout, p, op, c, pod)
	failure, warnings := plugin.Split(err)
	result := "success"
	if failure != nil {
		result = string(failure.Type)
	}
	h.Metrics.PluginDuration.WithLabelValues(p.Name(), string(op), result).Observe(time.Since(start).Seconds())
	return mutated, failure, warnings
}

// warningTexts are the admission warnings for a plugin's warnings, one each:
// "network plugin <name> warns (<type>): <parameter and message>; <what happened>".
func warningTexts(networkType string, warnings []*plugin.Error, then string) []string {
	out := make([]string, 0, len(warnings))
	for _, w := range warnings {
		out = append(out, fmt.Sprintf(WarningPrefix+"%s warns (%s): %s; %s", networkType, w.Type, errorText(w), then))
	}
	return out
}

// handleDelete allows a DELETE without running anything. The webhook configuration does not
// send DELETEs (AsyncWebhookName); one that arrives anyway (a configuration from an older
// release, installed by hand) changes nothing outside the pod: mutating admission runs
// before validating admission, so another admission controller may still refuse the delete,
// and a Service or Ingress removed now would leave a running game server without its
// network. The pod's per-pod network objects carry an owner reference to it, so garbage
// collection removes them once the pod object is gone, after its graceful termination; the
// objects of a Fixed network are owned by the GameServerSet and outlive the pod.
func (h *Handler) handleDelete(ctx context.Context, networkType string) (admission.Response, outcome) {
	ctrl.LoggerFrom(ctx).V(1).Info("DELETE allowed untouched; the network objects go by garbage collection once the pod is gone", "networkType", networkType)
	return admission.Allowed("network objects are removed by garbage collection once the pod is gone"), outcome{result: OutcomeAllowed}
}

// AuthoredStatusWarning is the admission warning for a new pod whose author wrote its
// network-status: the webhook drops it, since only the network plugin writes it.
const AuthoredStatusWarning = "annotation " + networkstatus.AnnotationNetworkStatus + " of a new pod is written by the network plugin only: dropped"

// notANetworkChange is added to the failure source in messages when a Synchronous
// decision admits an UPDATE.
const notANetworkChange = " (its Synchronous mode applies only to an UPDATE that changes " +
	networkstatus.AnnotationNetworkType + ", " + networkstatus.AnnotationNetworkConf + " or container ports)"

// handle does the work of Handle for CREATE and UPDATE of a pod with a network type.
//
// p is nil for a near-miss of a registered name: a parameterError, decided by the policy.
// Warnings of the plugin (plugin.Split) admit the pod as the plugin left it, with an
// admission warning each and one NetworkPluginWarning event (at CREATE and at an UPDATE that
// changes the network's inputs, not at every UPDATE, unless a warning is plugin.Error.Notable);
// only a failure goes through the
// Decision's failure mode.
func (h *Handler) handle(ctx context.Context, req admission.Request, op plugin.Operation, pod, old *corev1.Pod,
	p plugin.Plugin, networkType string) (admission.Response, outcome) {
	log := ctrl.LoggerFrom(ctx)
	var lookupErr error
	if p == nil {
		_, lookupErr = h.Plugins.Lookup(networkType)
	}
	// Everything below works from the pod with the manager's own annotations as the manager
	// wrote them; the patch turns the request's pod into the result, so a forged value is
	// replaced in the same admission.
	requested := pod
	pod, reverted := protectOwned(requested, old, op, byManager(h.ManagerUsername, req))
	var warnings []string
	if len(reverted) > 0 {
		warnings = append(warnings, ownedWarning(op, reverted))
		log.Info("Annotations owned by the manager were changed by the request; put back", "annotations", reverted, "user", req.UserInfo.Username)
	}
	// A new pod's network-status is the plugin's to write: one its author wrote (a manifest
	// copied from a running pod, or a forged Ready) would publish an address that is not
	// this pod's, or open its readiness gate with no network behind it.
	if _, authored := pod.Annotations[networkstatus.AnnotationNetworkStatus]; authored && op == plugin.OperationCreate && p != nil {
		if pod == requested {
			pod = pod.DeepCopy()
		}
		delete(pod.Annotations, networkstatus.AnnotationNetworkStatus)
		warnings = append(warnings, AuthoredStatusWarning)
		log.Info("A new pod carried a network-status its author wrote; dropped", "user", req.UserInfo.Username)
	}
	// A result another controller reports (an EIP plugin's allocated address) counts only
	// from that controller's identity: anyone else's change is put back.
	if guarded, keys := protectResults(pod, old, op, p, req.UserInfo); len(keys) > 0 {
		pod = guarded
		warnings = append(warnings, resultsWarning(networkType, op, keys))
		log.Info("Result annotations were changed by someone the plugin does not take them from; put back", "annotations", keys, "user", req.UserInfo.Username)
	}
	in := h.input(ctx, req, op, pod, old, p, networkType)
	// One resolution per request: the decision for a failed call is made from the same
	// snapshot, policies and CEL budget (Resolution.Failed).
	resolution, err := h.Resolver.Begin(ctx, in)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("resolve network plugin policy: %w", err)),
			outcome{result: OutcomeErrored}
	}
	decision := resolution.Decision(ctx)

	// The stored retry state (the manager owns it: protectOwned), decoded once for the
	// plugin run, the failure log and recordRetry.
	stored, storedErr := networkretry.FromPod(pod)
	// The root policies' network-conf rules, before the plugin claims or writes anything. A
	// live network they would refuse is kept: its plugin then runs read-only, and a run that
	// would write (make or repair anything) is the refusal after all.
	ruleErr, keepLive := h.checkRules(ctx, resolution, p, op, pod, old, in.Request.DryRun, &warnings)
	var mutated *corev1.Pod
	var perr *plugin.Error
	var pluginWarnings []*plugin.Error
	switch {
	case lookupErr != nil:
		mutated, perr = pod.DeepCopy(), plugin.AsError(lookupErr)
	case ruleErr != nil && !keepLive:
		mutated, perr = pod.DeepCopy(), ruleErr
	case in.Request.DryRun:
		// A dry run must have no side effects; plugins allocate ports and create Services.
		mutated = pod.DeepCopy()
		warnings = append(warnings, fmt.Sprintf("dry run: network plugin %s was not run", networkType))
	default:
		// run returns its own copy: the pod is not copied twice on the common path.
		runCtx, c := predictionFor(ctx, stored, pod, h.now()), client.Client(h.Client)
		if keepLive {
			runCtx, c = plugin.ReadOnly(runCtx), cacheOnly{h.Client}
		}
		mutated, perr, pluginWarnings = h.run(runCtx, c, p, op, pod, decision.Timeout)
		if keepLive && perr != nil && errors.Is(perr, plugin.ErrWouldWrite) {
			mutated, perr, pluginWarnings = pod.DeepCopy(), ruleErr, nil
		}
	}
	if len(pluginWarnings) > 0 {
		warnings = append(warnings, warningTexts(networkType, pluginWarnings, "the pod is admitted with the plugin's changes")...)
		texts := make([]string, len(pluginWarnings))
		for i, w := range pluginWarnings {
			texts[i] = errorText(w)
		}
		log.Info("Network plugin warns", "plugin", networkType, "warnings", texts)
		if networkInputsChanged(old, pod) || slices.ContainsFunc(pluginWarnings, func(w *plugin.Error) bool { return w.Notable }) {
			h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonNetworkPluginWarning, string(op),
				"Network plugin %s warns: %s; the pod is admitted with the plugin's changes", networkType, strings.Join(texts, "; "))
		}
	}

	if perr != nil && op == plugin.OperationUpdate && perr.KeepsReady() && networkstatus.IsReady(old) && !networkInputsChanged(old, pod) {
		return h.keepUnverified(ctx, req, requested, pod, networkType, perr, decision, warnings)
	}
	if perr != nil {
		msg := errorText(perr)
		decision = resolution.Failed(ctx, &policy.PluginError{Type: string(perr.Type), Message: msg, Reason: string(perr.ReasonOf())})
		h.auditPolicies(ctx, resolution, decision, pod, old, op, networkType, perr, in.Request.DryRun)
		failure := describe(decision.Explanation.Failure)
		mode := decision.Mode
		if mode == policyv1alpha1.FailureModeSynchronous && op == plugin.OperationUpdate && !networkInputsChanged(old, pod) {
			// The pod exists and the update leaves its network's inputs alone (labels, OKG
			// state, an in-place image update, the network controller's trigger stamps and
			// retry state): denying it would protect nothing, would block unrelated
			// controllers, and would stop the retries and the exhausted action for good.
			failure += notANetworkChange
			mode = policyv1alpha1.FailureModeAsynchronous
		}
		// A retry that fails as the one before (the stored retry state's lastError) is logged
		// at V(1): 5,000 pods retrying every 30s would otherwise log 170 lines a second
		// that say nothing new; the retry state and the Event's series count them.
		failLog := log
		if repeatedFailure(stored, perr.Type, msg) {
			failLog = log.V(1)
		}
		failLog.Info("Network plugin failed", "plugin", networkType, "errorType", perr.Type, "error", msg,
			"mode", mode, "decision", decisionText(decision), "explanation", decision.Explanation.String())
		if !in.Request.DryRun {
			h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, string(perr.Type), string(op),
				"Network plugin %s failed (%s): %s; %s by %s", networkType, perr.Type, msg,
				modeVerb(mode), failure)
		}
		if mode == policyv1alpha1.FailureModeSynchronous {
			return admission.Denied(fmt.Sprintf("network plugin %s failed (%s): %s; denied by %s (Synchronous)",
				networkType, perr.Type, msg, failure)), outcome{mode: decision.Mode, result: OutcomeDenied, warnings: warnings}
		}
		warnings = append(warnings, fmt.Sprintf(WarningPrefix+"%s failed (%s): %s; admitted with network NotReady by %s, retried for %s",
			networkType, perr.Type, msg, failure, decision.Retry.Window))
	}
	if perr == nil {
		h.auditPolicies(ctx, resolution, decision, pod, old, op, networkType, nil, in.Request.DryRun)
	}
	out := outcome{mode: decision.Mode, result: OutcomeAllowed, warnings: warnings}
	switch {
	case perr != nil:
		out.result = OutcomeAdmittedNotReady
	case len(pluginWarnings) > 0:
		out.result = OutcomeAllowedWithWarnings
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
	if stored != nil {
		stored = stored.WithMinInterval(h.MinRetryInterval)
	}
	if err := recordRetry(ctx, mutated, stored, storedErr, networkType, perr, decision, now); err != nil {
		return admission.Errored(http.StatusInternalServerError, err), outcome{mode: decision.Mode, result: OutcomeErrored}
	}
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	// The plugin ran to a result: the network was checked (Ready, or observably broken and
	// retried under the retry state).
	delete(mutated.Annotations, networkretry.UnverifiedAnnotation)
	delete(mutated.Annotations, AnnotationTraceparent)
	mutated.Annotations[AnnotationDecision] = decisionText(decision)
	if !in.Request.DryRun && (mutated.Annotations[networkstatus.AnnotationNetworkStatus] != pod.Annotations[networkstatus.AnnotationNetworkStatus] || WroteStatus(pod)) {
		// What the plugin (or markNotReady) wrote in this run is the manager's, and so is a
		// status it wrote before and left as it is: the readiness gate trusts only those
		// (AnnotationStatusDigest). A status the request brought and the plugin left
		// untouched (a pod with no node yet, whose plugin writes nothing) keeps the stored
		// digest, which does not match it.
		setStatusDigest(mutated)
		if networkstatus.IsReady(mutated) {
			// The manager's own Ready status ends the retry: the state goes in the same write
			// (the network controller reads it from the update's old pod for the NetworkReady
			// Event), where a write of its own would be one more pod UPDATE and admission.
			delete(mutated.Annotations, networkretry.Annotation)
		}
	}
	log.V(1).Info("Network decided", "plugin", networkType, "decision", mutated.Annotations[AnnotationDecision], "outcome", out.result)

	resp, direct, err := patchResponse(req.Object.Raw, requested, mutated, h.diffWholePod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), outcome{mode: decision.Mode, result: OutcomeErrored}
	}
	if !direct && !h.diffWholePod {
		log.V(1).Info("The plugin changed fields outside annotations, labels, container ports and readiness gates; the patch is a diff of the whole pod")
	}
	resp.AuditAnnotations = map[string]string{
		"failure-policy": describe(decision.Explanation.Failure),
		"decision":       decision.Explanation.String(),
	}
	return resp, out
}

// keepUnverified admits an UPDATE whose plugin run failed without saying anything about the
// network (perr.KeepsReady: a read failed, the plugin timed out, or a write to objects that
// still exist was not accepted, whatever the reason) on a pod whose stored network is Ready. Unknown is not broken: the pod keeps its network-status, its readiness-gate
// condition and its objects as they were, no retry state is written, so no window starts and
// no exhausted action can follow. The pod gets networkretry.UnverifiedAnnotation (kept from
// an earlier Unknown failure, or now), from which the network controller triggers the check
// again; a Warning event (reason = the error type) and an admission warning say what
// happened, and the request is counted with outcome OutcomeKeptUnverified. The webhook's
// other changes (the decision annotation, traceparent removed) are made as on any UPDATE.
func (h *Handler) keepUnverified(ctx context.Context, req admission.Request, requested, pod *corev1.Pod, networkType string,
	perr *plugin.Error, decision policy.Decision, warnings []string) (admission.Response, outcome) {
	msg := errorText(perr)
	what := "could not check the network"
	if !perr.IsUnknown() {
		what = "could not bring the network's objects up to date (the write was not accepted)"
	}
	ctrl.LoggerFrom(ctx).Info("Network plugin "+what+"; the Ready network is kept as it was", "plugin", networkType,
		"errorType", perr.Type, "error", msg, "decision", decisionText(decision))
	h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, string(perr.Type), string(plugin.OperationUpdate),
		"Network plugin %s %s (%s): %s; %s", networkType, what, perr.Type, msg, keptReady)
	warnings = append(warnings, fmt.Sprintf(WarningPrefix+"%s %s (%s): %s; %s",
		networkType, what, perr.Type, msg, keptReady))
	mutated := pod.DeepCopy()
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	now := h.now()
	since, ok := networkretry.UnverifiedSince(pod, now)
	if !ok {
		since = now
	}
	mutated.Annotations[networkretry.UnverifiedAnnotation] = networkretry.FormatUnverified(since)
	delete(mutated.Annotations, AnnotationTraceparent)
	mutated.Annotations[AnnotationDecision] = decisionText(decision)
	resp, _, err := patchResponse(req.Object.Raw, requested, mutated, h.diffWholePod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), outcome{mode: decision.Mode, result: OutcomeErrored}
	}
	return resp, outcome{mode: decision.Mode, result: OutcomeKeptUnverified, warnings: warnings}
}

// keptReady ends the messages of an Unknown failure on a Ready network.
const keptReady = "the Ready network is kept as it was (an error that says nothing about the network never takes it away) and is checked again"

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

// namespace returns the pod's Namespace, or nil when it cannot be read: an error, or a cache
// that has not seen it yet (policy.Input.NamespaceUnknown: a bounding root policy that could
// select the namespace applies, other namespaceSelectors do not match); it is logged.
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

// repeatedFailure reports whether the retry state the pod came with, prev (nil without one or
// with a malformed one), has lastError of type errType and message msg.
func repeatedFailure(prev *networkretry.State, errType plugin.ErrorType, msg string) bool {
	return prev != nil && prev.LastError != nil && prev.LastError.Type == string(errType) && prev.LastError.Message == msg
}

// recordRetry writes the retry state to the mutated pod when its network is not Ready after
// the plugin ran, counting on from prev, the state the pod came with (prevErr its decoding
// error: a malformed state is logged and replaced), with the Decision's schedule.
// A Ready network writes none; the state the pod came with is removed with the manager's
// status digest (handle), and the network controller reports the time it took from the
// update's old pod (NetworkReady).
func recordRetry(ctx context.Context, mutated *corev1.Pod, prev *networkretry.State, prevErr error, networkType string, perr *plugin.Error,
	decision policy.Decision, now time.Time) error {
	if st, err := networkstatus.StatusFromPod(mutated); err == nil && st != nil && st.CurrentNetworkState == networkstatus.NetworkReady {
		return nil
	}
	if prevErr != nil {
		ctrl.LoggerFrom(ctx).Error(prevErr, "Replacing a malformed retry state")
		prev = nil
	}
	if prev != nil && prev.Plugin != networkType {
		// Another plugin's window (the network type changed, or the state was forged): this
		// plugin's starts now.
		ctrl.LoggerFrom(ctx).Info("Replacing the retry state of another plugin", "statePlugin", prev.Plugin, "plugin", networkType)
		prev = nil
	}
	var rerr *networkretry.Error
	if perr != nil {
		rerr = &networkretry.Error{Type: string(perr.Type), Message: errorText(perr), Reason: string(perr.ReasonOf()), Unknown: perr.Inconclusive(), FromCache: perr.FromCache}
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
// "built-in default", with ", capped by root policy <namespace>/<name>@<generation>" when a
// root policy's bounds changed it (policy.Source.Describe).
func describe(s policy.Source) string {
	return s.Describe()
}

// networkInputsChanged reports whether an UPDATE changes what the pod's network depends on:
// the annotations game.kruise.io/network-type or game.kruise.io/network-conf, or the ports
// of its containers (name, containerPort, hostPort, protocol of spec.containers[*].ports,
// a missing protocol counting as TCP, the apiserver's default). A nil old pod counts as a
// change.
func networkInputsChanged(old, pod *corev1.Pod) bool {
	if old == nil {
		return true
	}
	for _, k := range []string{networkstatus.AnnotationNetworkType, networkstatus.AnnotationNetworkConf} {
		ov, oldHas := old.Annotations[k]
		nv, newHas := pod.Annotations[k]
		if ov != nv || oldHas != newHas {
			return true
		}
	}
	if len(old.Spec.Containers) != len(pod.Spec.Containers) {
		return true
	}
	for i := range old.Spec.Containers {
		op, np := old.Spec.Containers[i].Ports, pod.Spec.Containers[i].Ports
		if old.Spec.Containers[i].Name != pod.Spec.Containers[i].Name || len(op) != len(np) {
			return true
		}
		for j := range op {
			if op[j].Name != np[j].Name || op[j].ContainerPort != np[j].ContainerPort || op[j].HostPort != np[j].HostPort ||
				protocolOrTCP(op[j].Protocol) != protocolOrTCP(np[j].Protocol) {
				return true
			}
		}
	}
	return false
}

// protocolOrTCP is p, or TCP when empty (the apiserver's default for a container port).
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
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

// decisionText is the value of AnnotationDecision for decision: "<mode> by <the policy that
// decided the failure mode, namespace/name@generation, or the built-in default>". The
// webhook's and the network controller's log lines carry it under the key "decision".
func decisionText(decision policy.Decision) string {
	return fmt.Sprintf("%s by %s", decision.Mode, describe(decision.Explanation.Failure))
}
