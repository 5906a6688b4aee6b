package plugin

import (
	"context"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricCreateRaces is the counter of per-pod objects (label kind: "Service", "Ingress") whose
// create was refused as AlreadyExists because another admission of the same pod created it
// first, and that the run that lost adopted (CreateRaceAdopted). Two UPDATEs of one pod
// admitted at the same moment (a GameServer controller's write and this manager's own
// trigger, say) both run the plugin, and both find the object missing in the cache.
const MetricCreateRaces = "npp_plugin_create_races_total"

// createRaces is MetricCreateRaces; CreateRacesCollector registers it.
var createRaces = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricCreateRaces,
	Help: "Per-pod objects, by kind, whose create was refused as AlreadyExists because another admission of the same pod created it first, adopted by the losing run.",
}, []string{"kind"})

func init() {
	for _, kind := range []string{"Service", "Ingress"} {
		createRaces.WithLabelValues(kind)
	}
}

// CreateRaceAdopted counts, in MetricCreateRaces, an object of kind that the run read after
// its create lost (AwaitCreated) and found to be the pod's own.
func CreateRaceAdopted(kind string) { createRaces.WithLabelValues(kind).Inc() }

// CreateRacesCollector returns the collector of MetricCreateRaces, one per process; register
// it once (the manager registers it with controller-runtime's metrics.Registry).
func CreateRacesCollector() prometheus.Collector { return createRaces }

// createdWait bounds how long AwaitCreated waits for the cache to show an object another
// request created: a watch event reaches the cache within milliseconds on a healthy API
// server; a run that does not see it in time leaves the pod to its next attempt.
const createdWait = 2 * time.Second

// AwaitCreated is for a create that the API server refused as AlreadyExists: it reads the
// object of obj's kind, namespace and name from c until the cache shows it, every 20 ms, for
// at most 2 s or until ctx ends, so that the run goes on with the object as it stands (its
// adoption checks included) rather than failing. Each read goes into a new empty object; on
// return without error obj is replaced by the object as read (nothing of what the run had
// built into obj survives, whatever c's decoding). Errors: the last read's error, or ctx's,
// when the object was not seen.
func AwaitCreated(ctx context.Context, c client.Reader, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	typ := reflect.TypeOf(obj).Elem()
	var last error
	var got client.Object
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, createdWait, true, func(ctx context.Context) (bool, error) {
		fresh := reflect.New(typ).Interface().(client.Object)
		if last = c.Get(ctx, key, fresh); last != nil {
			return false, nil
		}
		got = fresh
		return true, nil
	})
	if got != nil {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got).Elem())
		return nil
	}
	if last != nil {
		return last
	}
	return err
}
