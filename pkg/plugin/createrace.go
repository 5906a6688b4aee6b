package plugin

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricCreateRaces is the counter of per-pod objects (label kind: "Service", "Ingress") whose
// create was refused as AlreadyExists because another admission of the same pod created it
// first, counted by the run that lost. Two UPDATEs of one pod admitted at the same moment (a
// GameServer controller's write and this manager's own trigger, say) both run the plugin,
// and both find the object missing in the cache.
const MetricCreateRaces = "npp_plugin_create_races_total"

// createRaces is MetricCreateRaces; CreateRacesCollector registers it.
var createRaces = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricCreateRaces,
	Help: "Per-pod objects, by kind, whose create was refused as AlreadyExists because another admission of the same pod created it first; the losing run reads and adopts it.",
}, []string{"kind"})

// CreateRacesCollector returns the collector of MetricCreateRaces, one per process; register
// it once (the manager registers it with controller-runtime's metrics.Registry).
func CreateRacesCollector() prometheus.Collector { return createRaces }

// createdWait bounds how long AwaitCreated waits for the cache to show an object another
// request created: a watch event reaches the cache within milliseconds on a healthy API
// server; a run that does not see it in time leaves the pod to its next attempt.
const createdWait = 2 * time.Second

// AwaitCreated is for a create that the API server refused as AlreadyExists: it counts the
// race (MetricCreateRaces, label kind) and reads obj (its namespace and name set) from c
// until the cache shows it, every 20 ms, for at most 2 s or until ctx ends, so that the run
// goes on with the object as it stands (its adoption checks included) rather than failing.
// On return without error obj holds the object as read, replacing what it held. Errors: the
// last read's error, or ctx's, when the object was not seen.
func AwaitCreated(ctx context.Context, c client.Reader, obj client.Object, kind string) error {
	createRaces.WithLabelValues(kind).Inc()
	key := client.ObjectKeyFromObject(obj)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, createdWait, true, func(ctx context.Context) (bool, error) {
		last = c.Get(ctx, key, obj)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
