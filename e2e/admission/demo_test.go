package admission

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestReadmeWalkThrough applies config/demo/nodeport-quota.yaml as the README's walk-through
// does and checks what the walk-through says the user sees: both pods admitted with their
// network NotReady, the retry state on each pod naming the quota's apiCallError and the policy
// quota-demo/nodeport-retry@1, a Warning event of that reason whose note names the plugin, the
// quota and the policy; then, after the README's `kubectl patch resourcequota`, both networks
// Ready within one maxInterval (20 s) and a NetworkReady event that says after how long and how
// many earlier runs.
func TestReadmeWalkThrough(t *testing.T) {
	const ns = "quota-demo"
	manifest, err := os.ReadFile("../../config/demo/nodeport-quota.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, string(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply -f config/demo/nodeport-quota.yaml: %v\n%s", err, out)
	}
	t.Cleanup(func() { deleteWorkloads(t, ns) })

	eventually(t, 90*time.Second, "step 1-2: both pods NotReady, retried under quota-demo/nodeport-retry@1 with the quota's apiCallError", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "arena")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			rs := retryState(t, &pods[i])
			if networkState(&pods[i]) != networkstatus.NetworkNotReady || rs == nil || rs.Policy != "quota-demo/nodeport-retry@1" ||
				rs.LastError == nil || rs.LastError.Type != "apiCallError" || !strings.Contains(rs.LastError.Message, "exceeded quota: nodeports") {
				return false, nil
			}
		}
		return hasEvent(ctx, ns, "arena-0", "apiCallError", "Network plugin Kubernetes-NodePort failed (apiCallError)",
			`services "arena-0" is forbidden: exceeded quota: nodeports`, "admitted NotReady by policy quota-demo/nodeport-retry@1")
	})

	if out, err := kubectl(t, "", "-n", ns, "patch", "resourcequota", "nodeports", "--type", "merge",
		"-p", `{"spec":{"hard":{"services.nodeports":"10"}}}`); err != nil {
		t.Fatalf("kubectl patch resourcequota: %v\n%s", err, out)
	}
	// One maxInterval (20 s) plus the quota controller's recount and the watch.
	eventually(t, 45*time.Second, "step 3: both networks Ready after the quota is raised, with a NetworkReady event", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "arena")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if networkState(&pods[i]) != networkstatus.NetworkReady {
				return false, nil
			}
		}
		// The webhook's Ready run removed the retry state; the Event reports it from the
		// update's old pod.
		return hasEvent(ctx, ns, "arena-0", "NetworkReady", "is Ready after", "earlier plugin runs left it NotReady")
	})
}
