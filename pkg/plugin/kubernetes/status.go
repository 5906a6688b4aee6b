package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// now is the clock for status times; tests replace it.
var now = time.Now

// previousStatus returns the pod's current network-status, or nil when it has none or
// it is not valid JSON (the plugins own that annotation and overwrite a broken one).
func previousStatus(pod *corev1.Pod) *networkstatus.NetworkStatus {
	st, err := networkstatus.StatusFromPod(pod)
	if err != nil {
		return nil
	}
	return st
}

// writeStatus sets the pod's network-status to the given state and addresses, keeping
// prev's NetworkType and DesiredNetworkState (OKG's controller owns those) and its
// times as networkstatus.SetStatus describes.
func writeStatus(pod *corev1.Pod, prev *networkstatus.NetworkStatus, state networkstatus.NetworkState, internal, external []networkstatus.NetworkAddress) error {
	st := networkstatus.NetworkStatus{CurrentNetworkState: state, InternalAddresses: internal, ExternalAddresses: external}
	if prev != nil {
		st.NetworkType, st.DesiredNetworkState = prev.NetworkType, prev.DesiredNetworkState
	}
	if err := networkstatus.SetStatus(pod, prev, st, now()); err != nil {
		return plugin.Wrap(plugin.InternalError, err, "write network status")
	}
	return nil
}

// writeNotReady keeps prev's addresses and marks the network NotReady.
func writeNotReady(pod *corev1.Pod, prev *networkstatus.NetworkStatus) error {
	if prev == nil {
		return writeStatus(pod, nil, networkstatus.NetworkNotReady, nil, nil)
	}
	return writeStatus(pod, prev, networkstatus.NetworkNotReady, prev.InternalAddresses, prev.ExternalAddresses)
}
