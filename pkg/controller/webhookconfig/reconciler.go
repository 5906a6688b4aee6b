package webhookconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// ControllerName is the controller's name in the manager (logger, metrics, workqueue).
const ControllerName = "webhook-configuration"

// syncWait is how long Reconcile waits for the policy store's initial sync before it looks
// again: computing from a store that has not seen every policy yet would move types out of
// the sync entry for a moment.
const syncWait = 200 * time.Millisecond

// Reconciler writes the matchConditions of the two pod webhook entries (podwebhook.SyncWebhookName
// and podwebhook.AsyncWebhookName) of one MutatingWebhookConfiguration from the policy
// store's current snapshot. It writes nothing else: the certificate rotator injects the
// caBundle into the same object, and kubectl or a GitOps tool own the rest.
type Reconciler struct {
	// Client reads (from the manager's cache) and patches the configuration. Required.
	Client client.Client
	// Name is the MutatingWebhookConfiguration (the manager's
	// --mutating-webhook-configuration). Required.
	Name string
	// Store is the policy store; each snapshot it publishes is reconciled. Required.
	Store *policy.Store
	// Plugins are the registered network plugins (their names are the network types).
	Plugins []policy.Plugin
	// Synced reports whether the store has compiled the initial list of policies; nil means
	// Store.HasSynced.
	Synced func() bool
	// StepBack, when set and true for a network type, makes both entries treat the type as
	// an unregistered one: its pods go to the async entry (failurePolicy Ignore), whose webhook
	// passes them through, so that kruise-game-manager alone serves a provider's types while
	// it still runs them (okgguard.Guard). StepBackChanged is closed at the next change of
	// that answer, to reconcile again. Both nil: never.
	StepBack        func(networkType string) (bool, string)
	StepBackChanged func() <-chan struct{}
	// Looked, when set and false, makes Reconcile write nothing and look again after
	// lookWait: before the OKG guard's first look (okgguard.Guard.Looked), StepBack's false
	// does not mean that kruise-game-manager is absent, and the configuration as installed
	// (no type behind the sync entry, config/webhook/mutating_patch.yaml) must stay until it
	// does. StepBackChanged is closed at the first look too. Nil counts as looked.
	Looked func() bool
}

// lookWait is how long Reconcile waits for the OKG guard's first look before it looks again
// (the guard looks at start, then every 10 s; its first look also closes StepBackChanged).
const lookWait = time.Second

// SetupWithManager registers the controller with mgr. It runs on the elected leader and is
// triggered by every snapshot the store publishes (Snapshot.Superseded, so a policy change
// is seen once the store has compiled it, never before) and by every change of the named
// configuration (someone edited or re-applied it: drift is repaired). Errors come from the
// controller builder.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&admissionregistrationv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.Name
		}))).
		WatchesRawSource(source.Func(r.snapshots)).
		WatchesRawSource(source.Func(r.stepBackChanges)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", ControllerName, err)
	}
	return nil
}

// stepBackChanges queues the configuration at each change of StepBack's answer, until ctx
// ends.
func (r *Reconciler) stepBackChanges(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	if r.StepBackChanged == nil {
		return nil
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Name}}
	go func() {
		for {
			select {
			case <-r.StepBackChanged():
				q.Add(req)
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// snapshots is the controller's source of policy changes: it queues the configuration at
// start and each time the store publishes a new snapshot, until ctx ends. Requests coalesce
// in the workqueue, so a burst of policy changes costs one reconcile.
func (r *Reconciler) snapshots(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Name}}
	go func() {
		for {
			snap := r.Store.Snapshot()
			q.Add(req)
			select {
			case <-snap.Superseded():
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=mutating-webhook-configuration,verbs=patch

// Reconcile computes the network type modes from the store's current snapshot
// (policy.Snapshot.NetworkTypeModes) and, when the matchConditions of either entry differ
// from MatchConditions of those types, patches them with a JSON patch that tests each
// entry's name at its index and sets only its matchConditions. A configuration that does not
// exist, or lacks one of the entries, is logged and left alone: its next change brings it
// back here. Before the store's initial sync and before the OKG guard's first look (Looked)
// nothing is written. Errors are API errors of the patch, wrapped.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	synced := r.Synced
	if synced == nil {
		synced = r.Store.HasSynced
	}
	if !synced() {
		return ctrl.Result{RequeueAfter: syncWait}, nil
	}
	if r.Looked != nil && !r.Looked() {
		return ctrl.Result{RequeueAfter: lookWait}, nil
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if client.IgnoreNotFound(err) == nil {
			log.Info("Mutating webhook configuration not found; waiting for it to be created")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get mutating webhook configuration %q: %w", req.Name, err)
	}

	modes := r.Store.Snapshot().NetworkTypeModes(r.Plugins)
	if r.StepBack != nil {
		modes = modes.Without(func(networkType string) bool {
			back, _ := r.StepBack(networkType)
			return back
		})
	}
	syncConds, asyncConds := MatchConditions(modes)
	var ops []patchOp
	for _, want := range []struct {
		name  string
		conds []admissionregistrationv1.MatchCondition
	}{{podwebhook.SyncWebhookName, syncConds}, {podwebhook.AsyncWebhookName, asyncConds}} {
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == want.name })
		if i < 0 {
			log.Info("Mutating webhook configuration has no such entry; leaving it alone", "webhook", want.name)
			return ctrl.Result{}, nil
		}
		if slices.Equal(cfg.Webhooks[i].MatchConditions, want.conds) {
			continue
		}
		ops = append(ops,
			patchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: want.name},
			patchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/matchConditions", i), Value: want.conds})
	}
	if len(ops) == 0 {
		return ctrl.Result{}, nil
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("encode the matchConditions patch: %w", err)
	}
	if err := r.Client.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patch the matchConditions of mutating webhook configuration %q: %w", req.Name, err)
	}
	log.Info("Pod webhook entries follow the policies", "synchronousTypes", modes.Synchronous,
		"asynchronousTypes", modes.Asynchronous, "synchronousIn", modes.SynchronousIn)
	return ctrl.Result{}, nil
}

// patchOp is one RFC 6902 JSON patch operation. "add" on an existing member replaces it.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}
