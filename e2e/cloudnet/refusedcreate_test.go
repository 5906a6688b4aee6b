package cloudnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestRefusedCreatesHoldNoLoadBalancerPorts: a burst of game-server CREATEs in one namespace
// that the API server refuses after the webhook ran (an invalid container name: validation
// comes after mutating admission) claims every listener port of a JdCloud NLB at admission;
// none of those pods ever exists. A game server of another namespace on the same load
// balancer is then NotReady for want of a port, and gets one once the refused CREATEs'
// claims have run out (lb.ClaimTTL, 44 s, on every replica), whichever replica its retries
// reach: the test polls for its Ready network; a claim would otherwise last until the
// leader's sweep on the leader, and until a restart on the other replica.
func TestRefusedCreatesHoldNoLoadBalancerPorts(t *testing.T) {
	startCloud(t)
	ctx := context.Background()
	refused := newNamespace(t, "cloud-refused", nil)
	other := newNamespace(t, "cloud-other", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: retry, namespace: %s}
spec:
  plugins: [%q]
  failureMode: Asynchronous
  retry: {window: 5m, interval: 2s, maxInterval: 4s}
`, other, jdcloud.NLBName))
	waitForPolicy(t, other, "retry", jdcloud.NLBName)
	const id = "refused-jdnlb"

	// Twice as many refused CREATEs as the load balancer has listeners: the first three
	// claim them all, the rest find it full (and are refused all the same).
	for i := range 2 * jdcloudPorts {
		tmpl := lbServer("refused", jdcloud.NLBName, jdcloud.ParamNLBIDs, id)
		tmpl.Spec.Containers[0].Name = "game_server" // not a DNS label: refused by validation
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: refused, Name: fmt.Sprintf("refused-%d", i), Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
		if _, err := cs.CoreV1().Pods(refused).Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("CREATE %d with an invalid container name: %v, want refused as invalid", i, err)
		}
	}
	burst := time.Now()

	tmpl := lbServer("other", jdcloud.NLBName, jdcloud.ParamNLBIDs, id)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "other-0", Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
	if _, err := cs.CoreV1().Pods(other).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the other namespace's game server: %v", err)
	}
	eventually(t, 3*time.Minute, "the other namespace's game server Ready on the load balancer", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(other).Get(ctx, "other-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := externalAddress(p)
		return ok, nil
	})
	t.Logf("Ready %s after the refused burst (claims count %s)", time.Since(burst).Round(time.Second), lb.ClaimTTL)
	noPortTwice(t, other, jdcloud.AnnotationNLBID, id)
}
