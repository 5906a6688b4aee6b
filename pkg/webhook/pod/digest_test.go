package pod

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestStatusDigestOnlyForWhatTheManagerWrote: the webhook records the digest of a
// network-status its plugin wrote, and of one it wrote earlier and left as it is; a Ready
// status the request forged, which the plugin left untouched (a pod with no node yet), does
// not get a matching digest, so the readiness gate never opens on it (WroteStatus).
func TestStatusDigestOnlyForWhatTheManagerWrote(t *testing.T) {
	forged := func(p *corev1.Pod) {
		if err := networkstatus.SetStatus(p, nil, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkReady,
			ExternalAddresses: []networkstatus.NetworkAddress{{IP: "203.0.113.66"}}}, testNow.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("forged Ready, plugin writes nothing", func(t *testing.T) {
		e := newEnv(t)
		e.async.keep = true
		old := gamePod(asyncNm)
		pod := old.DeepCopy()
		forged(pod)
		req := request(t, admissionv1.Update, pod, old, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if WroteStatus(got) {
			t.Errorf("a forged status got the manager's digest: %v", got.Annotations)
		}
	})
	t.Run("the plugin writes its own", func(t *testing.T) {
		e := newEnv(t)
		e.async.ready = true
		old := gamePod(asyncNm)
		pod := old.DeepCopy()
		forged(pod)
		req := request(t, admissionv1.Update, pod, old, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if !WroteStatus(got) {
			t.Errorf("the plugin's status has no matching digest: %v", got.Annotations)
		}
	})
	t.Run("a status the manager wrote before, left as it is", func(t *testing.T) {
		e := newEnv(t)
		e.async.keep = true
		old := gamePod(asyncNm)
		forged(old)
		setStatusDigest(old)
		pod := old.DeepCopy()
		pod.Labels = map[string]string{"x": "y"}
		req := request(t, admissionv1.Update, pod, old, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if !WroteStatus(got) {
			t.Errorf("the manager's earlier status lost its digest: %v", got.Annotations)
		}
	})
}
