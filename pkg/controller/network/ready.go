package network

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// clearedState is what r.cleared holds for a pod (its UID): either a note, a retry state
// the webhook removed with its Ready run (noteCleared: the state as the update's old pod
// carried it, and when the controller saw that update), or, with state nil, a reported mark:
// a Ready reconcile found no note and recorded NetworkReady counted from the pod's creation
// at resourceVersion (markReported), so that the update handler, which client-go calls after
// it updates the cache, does not note that same version's Ready once more.
type clearedState struct {
	uid             types.UID
	state           *networkretry.State
	at              time.Time
	resourceVersion string
}

// noteCleared keeps, in r.cleared under key, the retry state of an update that removed it
// while writing the manager's Ready network-status (the webhook's Ready run: the status
// digest matches, podwebhook.WroteStatus), decoded from old; reconcileReady reports it. Any
// other update, a state that does not decode or is another plugin's, and a version a Ready
// reconcile already reported (markReported) note nothing. The note lives in this replica's
// memory: a restart, a new leader, or a leader of an earlier release while the webhook is
// already this release's does not have it (reconcileReady then reports from the creation
// time, on pods with the readiness gate).
func (r *Reconciler) noteCleared(key types.NamespacedName, oldObj, newObj client.Object) {
	old, oldOK := oldObj.(*corev1.Pod)
	pod, newOK := newObj.(*corev1.Pod)
	if !oldOK || !newOK {
		return
	}
	if _, had := old.Annotations[networkretry.Annotation]; !had {
		return
	}
	if _, has := pod.Annotations[networkretry.Annotation]; has || !networkReady(pod) || !podwebhook.WroteStatus(pod) {
		return
	}
	now := r.opts.Clock.Now()
	state, err := networkretry.FromPodAt(old, now)
	if err != nil || state == nil || state.Plugin != pod.Annotations[networkstatus.AnnotationNetworkType] {
		return
	}
	if v, ok := r.cleared.Load(key); ok {
		if c := v.(clearedState); c.state == nil && c.uid == pod.UID && c.resourceVersion == pod.ResourceVersion {
			r.cleared.CompareAndDelete(key, v) // reported already, from the cache this update filled
			return
		}
	}
	r.cleared.Store(key, clearedState{uid: pod.UID, state: state, at: now})
}

// takeCleared removes and returns the note kept for the pod of key (uid), nil when there is
// none: no entry, a reported mark (kept), or a note of another pod of the name (dropped).
func (r *Reconciler) takeCleared(key types.NamespacedName, uid types.UID) *clearedState {
	v, ok := r.cleared.Load(key)
	if !ok || v.(clearedState).state == nil {
		return nil
	}
	r.cleared.CompareAndDelete(key, v)
	if c := v.(clearedState); c.uid == uid {
		return &c
	}
	return nil
}

// markReported records that a Ready reconcile of pod, read at resourceVersion, found no note
// and recorded NetworkReady counted from the pod's creation (clearedState).
func (r *Reconciler) markReported(pod *corev1.Pod, resourceVersion string) {
	r.cleared.Store(client.ObjectKeyFromObject(pod), clearedState{uid: pod.UID, resourceVersion: resourceVersion})
}

// dropMark removes a reported mark kept for the pod of key; a note is left for its Ready
// reconcile (which may be queued behind this one).
func (r *Reconciler) dropMark(key types.NamespacedName) {
	if v, ok := r.cleared.Load(key); ok && v.(clearedState).state == nil {
		r.cleared.CompareAndDelete(key, v)
	}
}

// reconcileReady handles a pod whose network-status is Ready. A status the manager did not
// write (podwebhook.WroteStatus) is only checked (checkStatusOrigin). The webhook removes
// the retry state with its Ready run, and cleared (noteCleared; nil without one) is that
// state: it records NetworkReady with the time from the state's since to the update that
// removed it, as this controller saw it (rounded to seconds), and what the earlier runs did
// (earlierRuns), and observes npp_network_ready_duration_seconds. A Ready pod that still
// carries a retry state (one an earlier release's webhook left) has it removed here,
// reported the same way. When the pod has the network-ready readiness gate and the condition
// is not True, it sets it True (reason NetworkReady); a pod reported by neither gets its
// NetworkReady event then, with the time since the pod was created (markReported). Each
// write is guarded by an optimistic lock, so the event is recorded once per Ready
// transition.
func (r *Reconciler) reconcileReady(ctx context.Context, pod *corev1.Pod, cleared *clearedState, now time.Time) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	plugin := pod.Annotations[networkstatus.AnnotationNetworkType]

	if !podwebhook.WroteStatus(pod) {
		// A Ready network-status the manager did not write (AnnotationStatusDigest): an
		// author's edit while no replica answered, one written through pods/status, or a pod
		// OKG or an earlier release admitted. It ends no retry, opens no gate and is no
		// NetworkReady: a plugin run checks the objects it describes and, if they exist and
		// match, writes it as the manager's (removing the retry state then). A gate already
		// True stays as it is meanwhile: a live game server is not taken out of its
		// endpoints on a question.
		return r.checkStatusOrigin(ctx, pod, now)
	}
	readVersion := pod.ResourceVersion // the version the update handler may not have seen yet
	_, hadState := pod.Annotations[networkretry.Annotation]
	state, stateErr := networkretry.FromPodAt(pod, now)
	reported := false
	if hadState {
		applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { delete(p.Annotations, networkretry.Annotation) })
		if err != nil || !applied {
			return ctrl.Result{}, err
		}
		if stateErr != nil {
			log.Info("Removed a malformed network retry state from a pod whose network is Ready", "error", stateErr.Error())
		} else {
			r.reportReady(ctx, pod, state, now)
			reported = true
			// The handler sees this removal as the webhook's would be: reported already.
			r.markReported(pod, pod.ResourceVersion)
		}
		// The removal was a pod UPDATE, so the webhook ran the plugin again; if the network
		// broke meanwhile, the webhook wrote a new retry state and the next event handles it.
		if !networkReady(pod) {
			return ctrl.Result{}, nil
		}
	} else if cleared != nil {
		r.reportReady(ctx, pod, cleared.state, cleared.at)
		reported = true
	}

	if !hasReadinessGate(pod) {
		return r.recheckUnverified(ctx, pod, now)
	}
	if c := networkCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
		return r.recheckUnverified(ctx, pod, now)
	}
	applied, err := r.patchPodStatus(ctx, pod, func(p *corev1.Pod) {
		setNetworkCondition(p, corev1.ConditionTrue, ReasonNetworkReady, "Network of plugin "+plugin+" is Ready", now)
	})
	if err != nil || !applied {
		return ctrl.Result{}, err
	}
	log.V(1).Info("Set the network readiness-gate condition", "status", corev1.ConditionTrue)
	if !reported {
		r.markReported(pod, readVersion)
		took := max(now.Sub(pod.CreationTimestamp.Time), 0).Round(time.Second)
		r.eventf(pod, corev1.EventTypeNormal, ReasonNetworkReady, actionClearRetry,
			"Network of plugin %s is Ready, %s after the pod was created", plugin, took)
	}
	return r.recheckUnverified(ctx, pod, now)
}

// reportReady records the NetworkReady Event of a network that turned Ready at readyAt after
// the retry state st, and observes npp_network_ready_duration_seconds.
func (r *Reconciler) reportReady(ctx context.Context, pod *corev1.Pod, st *networkretry.State, readyAt time.Time) {
	took := max(readyAt.Sub(st.Since.Time), 0).Round(time.Second)
	r.opts.Metrics.readySeconds.WithLabelValues(r.opts.pluginLabel(st.Plugin)).Observe(took.Seconds())
	r.eventf(pod, corev1.EventTypeNormal, ReasonNetworkReady, actionClearRetry,
		"Network of plugin %s is Ready after %s; %s (retry policy %s)",
		st.Plugin, took, earlierRuns(st), st.Policy)
	ctrl.LoggerFrom(ctx).Info("Network Ready after retries", "plugin", st.Plugin, "took", took.String(), "attempts", st.Attempts)
}

// earlierRuns says what the plugin runs before Ready did, from a retry state: how many left
// the network not Ready, and whether the last of them failed (its error type) or only waited
// (for the pod's node, its address, a node port, a load balancer's address), which is how a
// new game server's first run usually ends; a state keeps no count of failures.
func earlierRuns(s *networkretry.State) string {
	runs := "1 earlier plugin run"
	if s.Attempts != 1 {
		runs = fmt.Sprintf("%d earlier plugin runs", s.Attempts)
	}
	if s.LastError == nil {
		return runs + " left it NotReady, the last one waiting, without an error"
	}
	return fmt.Sprintf("%s left it NotReady, the last one with %s", runs, s.LastError.Type)
}

// Backoff of the checks of an unverified Ready network (recheckUnverified): the delay after
// a check is the time since the first Unknown failure, clamped to [minRecheck, maxRecheck].
const (
	minRecheck = 5 * time.Second
	maxRecheck = time.Minute
)

// recheckUnverified triggers the plugin again on a pod whose Ready network the webhook could
// not check (networkretry.UnverifiedAnnotation: an Unknown failure at UPDATE, kept Ready):
// it stamps game.kruise.io/network-trigger-time when the next check is due and requeues for
// the one after. The delay after a check grows with the time since the first Unknown
// failure, from minRecheck to maxRecheck. The webhook removes the annotation when a check
// gets a result (Ready, or broken: then the retry state takes over), which ends this; the
// network-status, the readiness gate and the pod stay as they are meanwhile, and no window
// runs. Counted in npp_network_rechecks_total.
func (r *Reconciler) recheckUnverified(ctx context.Context, pod *corev1.Pod, now time.Time) (ctrl.Result, error) {
	since, ok := networkretry.UnverifiedSince(pod, now)
	if !ok {
		return ctrl.Result{}, nil
	}
	last := triggerTime(pod)
	if last.Before(since) || last.After(now) {
		last = since
	}
	due := last.Add(min(max(last.Sub(since), minRecheck), maxRecheck))
	if now.Before(due) {
		return requeueAt(due, now), nil
	}
	stamp := now.UTC().Format(time.RFC3339)
	if pod.Annotations[networkstatus.AnnotationNetworkTriggerTime] == stamp {
		return ctrl.Result{RequeueAfter: minRequeue}, nil
	}
	applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp })
	if err != nil || !applied {
		return ctrl.Result{}, err
	}
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	r.opts.Metrics.rechecks.WithLabelValues(r.opts.pluginLabel(networkType)).Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("Triggered a check of an unverified Ready network", "plugin", networkType, "unverifiedSince", since, "triggerTime", stamp)
	// The stamp was a pod UPDATE and the webhook checked the network in the same write.
	if _, still := networkretry.UnverifiedSince(pod, now); !still {
		return ctrl.Result{}, nil
	}
	return requeueAt(now.Add(min(max(now.Sub(since), minRecheck), maxRecheck)), now), nil
}

// unwrittenStatusCheck is how often the controller asks for a plugin run on a pod whose Ready
// network-status the manager did not write (checkStatusOrigin), while that run does not
// happen (no replica answers): invalidStateRetry's pace, one pod write per 30 s.
const unwrittenStatusCheck = invalidStateRetry

// checkStatusOrigin handles a pod whose network-status says Ready but is not the one the
// manager last wrote (podwebhook.WroteStatus is false): it stamps
// game.kruise.io/network-trigger-time, at most once per unwrittenStatusCheck (or
// Options.MinRetryInterval, the longer), so that the webhook runs the plugin, which checks the
// Service, Ingress or host ports the status describes and writes its own status and digest;
// and requeues for the next stamp. It never sets the readiness-gate condition, either way.
// Counted in npp_network_rechecks_total. Errors are the write's.
func (r *Reconciler) checkStatusOrigin(ctx context.Context, pod *corev1.Pod, now time.Time) (ctrl.Result, error) {
	every := max(unwrittenStatusCheck, r.opts.MinRetryInterval)
	// A stamp in the future (the annotation is anyone's to write) does not hold this back.
	if last := triggerTime(pod); !last.IsZero() && !last.After(now) && now.Sub(last) < every {
		return requeueAt(last.Add(every), now), nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("A Ready network-status the manager did not write; asking for a plugin run to check it",
		"annotation", networkstatus.AnnotationNetworkStatus)
	stamp := now.UTC().Format(time.RFC3339)
	if _, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp }); err != nil {
		return ctrl.Result{}, err
	}
	r.opts.Metrics.rechecks.WithLabelValues(r.opts.pluginLabel(pod.Annotations[networkstatus.AnnotationNetworkType])).Inc()
	return ctrl.Result{RequeueAfter: every}, nil
}
