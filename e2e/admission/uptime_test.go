package admission

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// cacheSyncTimeout is controller-runtime's default CacheSyncTimeout: a controller whose
// sources have not synced by then stops the manager.
const cacheSyncTimeout = 2 * time.Minute

// TestEveryReplicaOutlivesTheCacheSyncTimeout: both replicas, the leader and the other, still
// run and are ready once the controllers' cache-sync timeout has passed since they started.
// The webhook-ca-bundle controller runs on every replica and watches the certificate Secret
// through a cache of its own; that cache was once started on the leader only, and the other
// replica exited 2 minutes after every start. The test runs late in the suite and waits for
// the rest of the timeout if the suite was quicker.
func TestEveryReplicaOutlivesTheCacheSyncTimeout(t *testing.T) {
	if wait := time.Until(managerStarted.Add(cacheSyncTimeout + 15*time.Second)); wait > 0 {
		t.Logf("waiting %s for the cache-sync timeout to pass", wait.Round(time.Second))
		time.Sleep(wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range mgr.Replicas {
		if !r.Running() {
			t.Errorf("replica %s exited:\n%s", r.Name, mgr.LogTails(4096))
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.ProbeURL+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("replica %s /readyz: %v", r.Name, err)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("replica %s /readyz: %s", r.Name, resp.Status)
		}
	}
}
