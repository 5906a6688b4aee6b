package eventrecorder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// capture records what it is given.
type capture struct{ regarding, related []runtime.Object }

func (c *capture) Eventf(regarding, related runtime.Object, _, _, _, _ string, _ ...any) {
	c.regarding = append(c.regarding, regarding)
	c.related = append(c.related, related)
}

// TestWithoutResourceVersion: two versions of one pod give equal references (kind, namespace,
// name, UID; no resourceVersion), so the events library aggregates their events.
func TestWithoutResourceVersion(t *testing.T) {
	c := &capture{}
	r := WithoutResourceVersion(c, scheme.Scheme)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0", UID: "uid-1", ResourceVersion: "10"}}
	r.Eventf(pod, nil, corev1.EventTypeWarning, "apiCallError", "UPDATE", "quota")
	pod.ResourceVersion = "11"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", UID: "uid-n", ResourceVersion: "7"}}
	r.Eventf(pod, node, corev1.EventTypeWarning, "apiCallError", "UPDATE", "quota")

	want := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"}
	for i, got := range c.regarding {
		if diff := cmp.Diff(runtime.Object(want), got); diff != "" {
			t.Errorf("regarding %d (-want,+got):\n%s", i, diff)
		}
	}
	if c.related[0] != nil {
		t.Errorf("related = %v, want nil", c.related[0])
	}
	if diff := cmp.Diff(runtime.Object(&corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-0", UID: "uid-n"}), c.related[1]); diff != "" {
		t.Errorf("related (-want,+got):\n%s", diff)
	}
	// A type the scheme does not know is passed through for the inner recorder to report.
	unknown := &metav1.PartialObjectMetadata{}
	r.Eventf(unknown, nil, corev1.EventTypeNormal, "R", "A", "n")
	if c.regarding[2] != runtime.Object(unknown) {
		t.Errorf("regarding = %v, want the object itself", c.regarding[2])
	}
}
