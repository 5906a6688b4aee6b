package webhookcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ControllerName is the bundle controller's name in the manager (logger, metrics, workqueue).
const ControllerName = "webhook-ca-bundle"

// OverlapUntilAnnotation is set on a webhook configuration while its caBundle carries
// previous CAs beside the Secret's current one: the time (RFC 3339, UTC) after which they are
// dropped. It is absent when the caBundle holds only the current CA.
const OverlapUntilAnnotation = "policy.game.kruise.io/ca-overlap-until"

// DefaultOverlap is how long a previous CA stays in the caBundle after the Secret got a new
// one. A Secret volume shows an update after the kubelet's sync period plus its cache's TTL
// (about a minute each by default, "Mounted Secrets are updated automatically" in the
// Kubernetes Secret documentation), so every replica serves the new certificate well before.
const DefaultOverlap = 10 * time.Minute

// CACertKey is the key of the CA certificate (PEM) in the certificate Secret, as
// open-policy-agent/cert-controller writes it.
const CACertKey = "ca.crt"

// BundleReconciler writes the caBundle of every entry of the named webhook configurations
// from the certificate Secret's CA, keeping the CAs the caBundle held before beside a new one
// for Overlap (OverlapUntilAnnotation), so that a replica still serving a certificate of the
// previous CA is trusted until it serves the new one. It writes the caBundles and that
// annotation only, with an update that fails on a conflict (and is retried), and runs on
// every replica: each computes the same result, so whichever writes first wins and the
// others find nothing to do.
type BundleReconciler struct {
	// Client reads the webhook configurations (the manager's cache) and updates them. Required.
	Client client.Client
	// SecretCache reads the certificate Secret: a cache scoped to its namespace, so that the
	// manager needs no cluster-wide Secret access. Required; NewSecretCache makes one.
	SecretCache cache.Cache
	// Secret is the certificate Secret (cert-controller's CertRotator.SecretKey). Required.
	Secret types.NamespacedName
	// Mutating and Validating name the webhook configurations; an empty name is skipped.
	Mutating, Validating string
	// Overlap is how long a previous CA stays trusted; zero means DefaultOverlap.
	Overlap time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// NewSecretCache returns a cache of the Secret key only (a field selector on its name in its
// namespace), to be added to mgr as EveryReplica(c) and passed as
// BundleReconciler.SecretCache. Errors come from cache.New.
func NewSecretCache(mgr ctrl.Manager, key types.NamespacedName) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{key.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Field: fields.OneTermEqualSelector("metadata.name", key.Name),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("create the cache of Secret %s: %w", key, err)
	}
	return c, nil
}

// EveryReplica returns c as a manager runnable that every replica starts, leader or not,
// with the manager's own cache and before any controller. A cache added to a manager as it
// is counts as a leader-election runnable (it implements neither GetCache nor
// NeedLeaderElection), so only the leader would start it: on any other replica the
// BundleReconciler, which runs everywhere, would wait for the Secret's informer until the
// controller's cache-sync timeout (2 minutes) and stop the manager
// (TestEveryReplicaOutlivesTheCacheSyncTimeout in e2e/admission).
func EveryReplica(c cache.Cache) manager.Runnable { return everyReplicaCache{c} }

// everyReplicaCache is a cache that controller-runtime's manager puts in its group of caches
// (the hasCache interface: GetCache), started on every replica first.
type everyReplicaCache struct{ cache.Cache }

// GetCache returns the cache itself.
func (c everyReplicaCache) GetCache() cache.Cache { return c.Cache }

// SetupWithManager registers the controller with mgr. It runs on every replica (no leader
// election: a new CA must reach the caBundle even while no leader is elected) and reconciles
// one key on any change of the Secret or of either configuration. Errors come from the
// controller builder.
func (r *BundleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: r.Secret}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	named := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == r.Mutating || o.GetName() == r.Validating
	}))
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(r.SecretCache, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(context.Context, *corev1.Secret) []reconcile.Request { return []reconcile.Request{key} }))).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, toKey, named).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, toKey, named).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", ControllerName, err)
	}
	return nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=mutating-webhook-configuration;validating-webhook-configuration,verbs=update
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch

// Reconcile reads the Secret's CA (CACertKey) and brings the caBundle of each configuration
// to it (bundleFor). A Secret that is missing or holds no valid CA yet is left to the
// rotator, and a missing configuration to whoever creates it; both come back here when they
// change. It requeues at the end of an overlap. Errors are API errors, wrapped.
func (r *BundleReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	secret := &corev1.Secret{}
	if err := r.SecretCache.Get(ctx, r.Secret, secret); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get Secret %s: %w", r.Secret, err)
	}
	current := parseCAs(secret.Data[CACertKey], now)
	if len(current) == 0 {
		return ctrl.Result{}, nil
	}
	overlap := r.Overlap
	if overlap == 0 {
		overlap = DefaultOverlap
	}
	var requeue time.Duration
	for _, obj := range []webhookConfiguration{
		{name: r.Mutating, obj: &admissionregistrationv1.MutatingWebhookConfiguration{}},
		{name: r.Validating, obj: &admissionregistrationv1.ValidatingWebhookConfiguration{}},
	} {
		if obj.name == "" {
			continue
		}
		after, err := r.reconcileOne(ctx, obj, current, now, overlap)
		if err != nil {
			return ctrl.Result{}, err
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// webhookConfiguration is one named MutatingWebhookConfiguration or
// ValidatingWebhookConfiguration.
type webhookConfiguration struct {
	name string
	obj  client.Object
}

// bundles returns a pointer to the caBundle of each entry of the configuration.
func (w webhookConfiguration) bundles() []*[]byte {
	var out []*[]byte
	switch o := w.obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, &o.Webhooks[i].ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, &o.Webhooks[i].ClientConfig.CABundle)
		}
	}
	return out
}

// reconcileOne brings one configuration's caBundles and OverlapUntilAnnotation to what
// bundleFor says, and returns how long until its overlap ends (0: no overlap).
func (r *BundleReconciler) reconcileOne(ctx context.Context, w webhookConfiguration, current []*x509.Certificate, now time.Time, overlap time.Duration) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx)
	if err := r.Client.Get(ctx, types.NamespacedName{Name: w.name}, w.obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return 0, nil
		}
		return 0, fmt.Errorf("get webhook configuration %q: %w", w.name, err)
	}
	ptrs := w.bundles()
	held := make([][]byte, len(ptrs))
	for i, p := range ptrs {
		held[i] = *p
	}
	until, _ := time.Parse(time.RFC3339, w.obj.GetAnnotations()[OverlapUntilAnnotation])
	want, wantUntil := bundleFor(current, held, until, now, overlap)
	changed := false
	for _, p := range ptrs {
		if !bytes.Equal(*p, want) {
			*p, changed = want, true
		}
	}
	ann := w.obj.GetAnnotations()
	gotUntil, has := ann[OverlapUntilAnnotation]
	switch {
	case wantUntil.IsZero() && has:
		delete(ann, OverlapUntilAnnotation)
		w.obj.SetAnnotations(ann)
		changed = true
	case !wantUntil.IsZero() && gotUntil != wantUntil.Format(time.RFC3339):
		if ann == nil {
			ann = map[string]string{}
		}
		ann[OverlapUntilAnnotation] = wantUntil.Format(time.RFC3339)
		w.obj.SetAnnotations(ann)
		changed = true
	}
	if changed {
		if err := r.Client.Update(ctx, w.obj); err != nil {
			return 0, fmt.Errorf("update the caBundle of webhook configuration %q: %w", w.name, err)
		}
		log.Info("Webhook caBundle follows the certificate Secret", "configuration", w.name,
			"cas", len(parseCAs(want, now)), "overlapUntil", wantUntil)
	}
	if wantUntil.IsZero() {
		return 0, nil
	}
	return wantUntil.Sub(now) + time.Second, nil
}

// bundleFor returns the caBundle every entry should carry and the end of the overlap (zero:
// none), given the Secret's current CAs, the caBundles the entries hold, the overlap end the
// configuration records, the time and the overlap period:
//   - An entry that lacks a current CA means the CA is new: the previous CAs (every valid CA
//     any entry holds that is not current) stay beside it until now+overlap.
//   - During an overlap, the previous CAs stay until its end.
//   - Otherwise the caBundle is the current CAs alone.
//
// The CAs are in canonicalOrder, a function of the certificates alone: replicas whose Secret
// caches differ for a moment (one still sees the previous CA as current) compute the same
// bytes, and do not rewrite each other's caBundle back and forth.
func bundleFor(current []*x509.Certificate, held [][]byte, until, now time.Time, overlap time.Duration) ([]byte, time.Time) {
	fresh := len(held) == 0
	var previous []*x509.Certificate
	for _, h := range held {
		cas := parseCAs(h, now)
		for _, c := range current {
			if !containsCert(cas, c) {
				fresh = true
			}
		}
		for _, c := range cas {
			if !containsCert(current, c) && !containsCert(previous, c) {
				previous = append(previous, c)
			}
		}
	}
	switch {
	case len(previous) == 0:
		return encodePEM(canonicalOrder(current)), time.Time{}
	case fresh:
		until = now.Add(overlap).UTC().Truncate(time.Second)
	case !now.Before(until):
		return encodePEM(canonicalOrder(current)), time.Time{}
	}
	return encodePEM(canonicalOrder(append(append([]*x509.Certificate{}, current...), previous...))), until
}

// canonicalOrder returns certs, a new slice, newest first (NotBefore descending), certificates
// of the same NotBefore by their DER bytes.
func canonicalOrder(certs []*x509.Certificate) []*x509.Certificate {
	out := slices.Clone(certs)
	slices.SortStableFunc(out, func(a, b *x509.Certificate) int {
		if c := b.NotBefore.Compare(a.NotBefore); c != 0 {
			return c
		}
		return bytes.Compare(a.Raw, b.Raw)
	})
	return out
}
