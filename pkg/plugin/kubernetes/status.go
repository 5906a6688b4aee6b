package kubernetes

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// previousStatus returns the pod's current network-status, or nil when it has none or
// it is not valid JSON (the plugins own that annotation and overwrite a broken one).
func previousStatus(pod *corev1.Pod) *networkstatus.NetworkStatus {
	st, err := networkstatus.StatusFromPod(pod)
	if err != nil {
		return nil
	}
	return st
}

// writeStatus sets the pod's network-status to a new status with the given state and
// addresses and nothing else, as OKG's plugins write it: no networkType, no
// desiredNetworkState (OKG's GameServer controller keeps those on the GameServer) and
// createTime and lastTransitionTime null (docs/okg-compatibility.md says why no time is
// written). The bytes are networkstatus.EncodeStatus's.
func writeStatus(pod *corev1.Pod, state networkstatus.NetworkState, internal, external []networkstatus.NetworkAddress) error {
	return networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: state, InternalAddresses: internal, ExternalAddresses: external})
}

// writeNotReady marks the network NotReady keeping every other field of prev (its
// addresses, as OKG does while it brings an object back to the parameters), or writes
// a bare NotReady status when the pod has none.
func writeNotReady(pod *corev1.Pod, prev *networkstatus.NetworkStatus) error {
	if prev == nil {
		return writeStatus(pod, networkstatus.NetworkNotReady, nil, nil)
	}
	st := *prev
	st.CurrentNetworkState = networkstatus.NetworkNotReady
	return networkstatus.PutStatus(pod, st)
}
