package network

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// NetworkTypeIndex is the field index of pods by their game.kruise.io/network-type
// annotation (IndexNetworkType), so that the state gauges and `nppctl status` list only game
// servers, not every pod of the cluster.
const NetworkTypeIndex = "metadata.annotations[game.kruise.io/network-type]"

// IndexNetworkType is the indexer function of NetworkTypeIndex: the pod's
// game.kruise.io/network-type, none for a pod without one.
func IndexNetworkType(obj client.Object) []string {
	if t, ok := obj.GetAnnotations()[networkstatus.AnnotationNetworkType]; ok {
		return []string{t}
	}
	return nil
}

// RegisterIndexes adds NetworkTypeIndex to the pod informer of indexer (the manager's field
// indexer, before the cache starts). Errors are the indexer's, for example when the index is
// already registered.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, NetworkTypeIndex, IndexNetworkType)
}

// PodState is where a game server's network stands, as its annotations say: one of the
// constants below, exactly one per pod.
type PodState string

const (
	// StateReady: game.kruise.io/network-status says Ready.
	StateReady PodState = "Ready"
	// StateWaiting: network-status says Waiting (OKG's state while a change is applied).
	StateWaiting PodState = "Waiting"
	// StateNotReady: network-status says NotReady and no retry is under way (no retry state
	// annotation: the decision was not to retry, or nothing has failed yet).
	StateNotReady PodState = "NotReady"
	// StateRetrying: the pod has a retry state whose window has not been exhausted and its
	// network is not Ready (NotReady, or no network-status yet).
	StateRetrying PodState = "Retrying"
	// StateExhausted: the retry window of this pod (its UID) closed with the network not
	// Ready; the exhausted action was taken.
	StateExhausted PodState = "Exhausted"
	// StatePending: no network-status and no retry state yet: the webhook has not run the
	// plugin to completion (for example a NodePort pod not yet scheduled) or has not seen
	// the pod (CatchUp).
	StatePending PodState = "Pending"
)

// PodStates are every PodState, in the order reports list them.
var PodStates = []PodState{StateReady, StateWaiting, StateNotReady, StateRetrying, StateExhausted, StatePending}

// PodNetwork is what Classify reads from one game server.
type PodNetwork struct {
	// Plugin is the pod's game.kruise.io/network-type.
	Plugin string
	// State is where its network stands.
	State PodState
	// NotReadySince is when the network was first seen not Ready: the retry state's since,
	// never before the pod's creation (the apiserver's time, which a pod author cannot
	// set); for a NotReady pod without retry state, when it was scheduled. Zero for Ready,
	// Waiting and Pending pods.
	NotReadySince time.Time
	// CatchUp is true for a pod that no webhook replica has decided (no
	// policy.game.kruise.io/network-decision annotation): the catch-up controller's backlog.
	CatchUp bool
	// Retry is the pod's retry state, nil when it has none or it does not decode.
	Retry *networkretry.State
	// Decision is the pod's policy.game.kruise.io/network-decision annotation, "" when none.
	Decision string
}

// Classify reads where pod's network stands at now from the annotations the manager writes.
// It returns false for a pod that is not a game server of one of types (nil types accepts
// any network type), is terminating or has its network disabled
// (the label game.kruise.io/network-disabled: "true"). Annotations that do not decode count as absent: a
// retry state that does not decode is no retry, a network-status that does not decode is no
// status.
func Classify(pod *corev1.Pod, types map[string]bool, now time.Time) (PodNetwork, bool) {
	plugin, ok := pod.Annotations[networkstatus.AnnotationNetworkType]
	if !ok || pod.DeletionTimestamp != nil || (types != nil && !types[plugin]) {
		return PodNetwork{}, false
	}
	if disabled, _ := networkstatus.NetworkDisabled(pod); disabled {
		return PodNetwork{}, false
	}
	n := PodNetwork{Plugin: plugin}
	n.Decision, n.CatchUp = pod.Annotations[podwebhook.AnnotationDecision], true
	if _, decided := pod.Annotations[podwebhook.AnnotationDecision]; decided {
		n.CatchUp = false
	}
	if st, err := networkretry.FromPodAt(pod, now); err == nil {
		n.Retry = st
	}
	var current networkstatus.NetworkState
	if st, err := networkstatus.StatusFromPod(pod); err == nil && st != nil {
		current = st.CurrentNetworkState
	}
	switch {
	case current == networkstatus.NetworkReady:
		n.State = StateReady
	case current == networkstatus.NetworkWaiting:
		n.State = StateWaiting
	case n.Retry != nil && n.Retry.ExhaustedFor(pod.UID):
		n.State = StateExhausted
	case n.Retry != nil:
		n.State = StateRetrying
	case current == networkstatus.NetworkNotReady:
		n.State = StateNotReady
	default:
		n.State = StatePending
	}
	switch n.State {
	case StateExhausted, StateRetrying:
		n.NotReadySince = n.Retry.Since.Time
	case StateNotReady:
		n.NotReadySince, _ = networkretry.ScheduledAt(pod)
	}
	if !n.NotReadySince.IsZero() && n.NotReadySince.Before(pod.CreationTimestamp.Time) {
		n.NotReadySince = pod.CreationTimestamp.Time
	}
	return n, true
}

// NotReady reports whether s is a network that is not Ready and that the manager has acted
// on: NotReady, Retrying or Exhausted.
func (s PodState) NotReady() bool {
	return s == StateNotReady || s == StateRetrying || s == StateExhausted
}
