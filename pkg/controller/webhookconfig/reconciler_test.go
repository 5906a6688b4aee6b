package webhookconfig

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

const (
	testRoot   = "npp-system"
	configName = "npp-mutating-webhook-configuration"
)

var testPlugins = []policy.Plugin{
	{Name: "Kubernetes-HostPort", Synchronous: true},
	{Name: "Kubernetes-NodePort", Alias: "NodePort-Network"},
	{Name: "Kubernetes-Ingress"},
}

func newStore(t *testing.T, policies ...*v1alpha1.NetworkPluginPolicy) *policy.Store {
	t.Helper()
	m, err := policy.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewMetrics(): %v", err)
	}
	s, err := policy.NewStore(policy.StoreOptions{RootNamespace: testRoot, Metrics: m})
	if err != nil {
		t.Fatalf("NewStore(): %v", err)
	}
	h := s.Handler(context.Background())
	for _, p := range policies {
		h.OnAdd(p, true)
	}
	return s
}

func syncNodePort() *v1alpha1.NetworkPluginPolicy {
	m := v1alpha1.FailureModeSynchronous
	return &v1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: testRoot, Name: "np-sync", UID: "uid-np", Generation: 1},
		Spec:       v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"NodePort-Network"}, FailureMode: &m},
	}
}

// entry is a webhook entry as installed: the caBundle the rotator injected, a
// namespaceSelector, and conds.
func entry(name string, conds []admissionregistrationv1.MatchCondition) admissionregistrationv1.MutatingWebhook {
	path := podwebhook.Path
	return admissionregistrationv1.MutatingWebhook{
		Name:              name,
		ClientConfig:      admissionregistrationv1.WebhookClientConfig{CABundle: []byte("ca"), Service: &admissionregistrationv1.ServiceReference{Namespace: "npp-system", Name: "webhook", Path: &path}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "games"}},
		MatchConditions:   conds,
	}
}

func configuration(webhooks ...admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: configName}, Webhooks: webhooks}
}

func builtIn() *admissionregistrationv1.MutatingWebhookConfiguration {
	syncConds, asyncConds := MatchConditions(builtInModes)
	return configuration(entry(podwebhook.SyncWebhookName, syncConds), entry(podwebhook.AsyncWebhookName, asyncConds))
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}
	return s
}

func TestReconcile(t *testing.T) {
	np := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		syncConds, asyncConds := MatchConditions(npSyncModes)
		return configuration(entry(podwebhook.SyncWebhookName, syncConds), entry(podwebhook.AsyncWebhookName, asyncConds))
	}
	drifted := builtIn()
	drifted.Webhooks[1].MatchConditions = append(drifted.Webhooks[1].MatchConditions, admissionregistrationv1.MatchCondition{Name: "mine", Expression: "true"})
	reversed := builtIn()
	reversed.Webhooks[0], reversed.Webhooks[1] = reversed.Webhooks[1], reversed.Webhooks[0]
	reversedNP := np()
	reversedNP.Webhooks[0], reversedNP.Webhooks[1] = reversedNP.Webhooks[1], reversedNP.Webhooks[0]
	foreign := entry("other.example.com", []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "true"}})
	withForeign := builtIn()
	withForeign.Webhooks = append([]admissionregistrationv1.MutatingWebhook{foreign}, withForeign.Webhooks...)
	withForeignNP := np()
	withForeignNP.Webhooks = append([]admissionregistrationv1.MutatingWebhook{foreign}, withForeignNP.Webhooks...)
	noConds := configuration(entry(podwebhook.SyncWebhookName, nil), entry(podwebhook.AsyncWebhookName, nil))
	steppedBack := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		syncConds, asyncConds := MatchConditions(policy.NetworkTypeModes{})
		return configuration(entry(podwebhook.SyncWebhookName, syncConds), entry(podwebhook.AsyncWebhookName, asyncConds))
	}
	onlyAsync := configuration(entry(podwebhook.AsyncWebhookName, nil))

	cases := map[string]struct {
		policies []*v1alpha1.NetworkPluginPolicy
		existing *admissionregistrationv1.MutatingWebhookConfiguration
		unsynced bool
		stepBack bool
		unlooked bool
		want     *admissionregistrationv1.MutatingWebhookConfiguration // nil: no configuration
		wantRes  ctrl.Result
		patched  bool
	}{
		"built-in defaults already installed: no write": {existing: builtIn(), want: builtIn()},
		"a Synchronous NodePort policy moves NodePort to the sync entry": {
			policies: []*v1alpha1.NetworkPluginPolicy{syncNodePort()}, existing: builtIn(), want: np(), patched: true,
		},
		"policy deleted: NodePort back to the async entry": {existing: np(), want: builtIn(), patched: true},
		"drift repaired":                      {existing: drifted, want: builtIn(), patched: true},
		"entries without conditions get them": {existing: noConds, want: builtIn(), patched: true},
		"entries in the other order":          {policies: []*v1alpha1.NetworkPluginPolicy{syncNodePort()}, existing: reversed, want: reversedNP, patched: true},
		"other entries left alone":            {policies: []*v1alpha1.NetworkPluginPolicy{syncNodePort()}, existing: withForeign, want: withForeignNP, patched: true},
		"an entry missing: nothing written":   {existing: onlyAsync, want: onlyAsync},
		"no configuration: nothing to do":     {},
		"stepping back: no type in the sync entry, even a Synchronous one": {
			policies: []*v1alpha1.NetworkPluginPolicy{syncNodePort()}, existing: builtIn(), stepBack: true, want: steppedBack(), patched: true,
		},
		"no longer stepping back: the types back": {existing: steppedBack(), want: builtIn(), patched: true},
		"as installed, before the guard's first look: nothing written, looked at again": {
			existing: steppedBack(), unlooked: true, want: steppedBack(), wantRes: ctrl.Result{RequeueAfter: lookWait},
		},
		"as installed, after the first look: the types a policy may make Synchronous in the sync entry": {
			existing: steppedBack(), want: builtIn(), patched: true,
		},
		"store not synced yet: wait, nothing written": {policies: []*v1alpha1.NetworkPluginPolicy{syncNodePort()}, existing: builtIn(), unsynced: true, want: builtIn(), wantRes: ctrl.Result{RequeueAfter: syncWait}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(newScheme(t))
			if tc.existing != nil {
				b = b.WithObjects(tc.existing.DeepCopy())
			}
			c := b.Build()
			before := &admissionregistrationv1.MutatingWebhookConfiguration{}
			_ = c.Get(context.Background(), types.NamespacedName{Name: configName}, before)
			r := &Reconciler{Client: c, Name: configName, Store: newStore(t, tc.policies...), Plugins: testPlugins,
				Synced: func() bool { return !tc.unsynced }, StepBack: func(string) (bool, string) { return tc.stepBack, "" },
				Looked: func() bool { return !tc.unlooked }}

			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: configName}})
			if err != nil {
				t.Fatalf("Reconcile(): %v", err)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			got := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := c.Get(context.Background(), types.NamespacedName{Name: configName}, got); err != nil {
				if tc.want != nil || client.IgnoreNotFound(err) != nil {
					t.Fatalf("get configuration: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want.Webhooks, got.Webhooks); diff != "" {
				t.Errorf("webhooks (-want,+got):\n%s", diff)
			}
			if patched := got.ResourceVersion != before.ResourceVersion; patched != tc.patched {
				t.Errorf("configuration written = %t, want %t", patched, tc.patched)
			}
		})
	}
}

// TestSnapshotsSource: the configuration is queued at start and again after each snapshot
// the store publishes, so a policy change is reconciled only once the store has compiled it.
func TestSnapshotsSource(t *testing.T) {
	store := newStore(t)
	r := &Reconciler{Name: configName, Store: store}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.snapshots(ctx, q); err != nil {
		t.Fatalf("snapshots(): %v", err)
	}
	want := reconcile.Request{NamespacedName: types.NamespacedName{Name: configName}}
	next := func(what string) {
		t.Helper()
		got := make(chan reconcile.Request, 1)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		select {
		case item := <-got:
			q.Done(item)
			if item != want {
				t.Errorf("%s: queued %v, want %v", what, item, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing queued", what)
		}
	}
	next("at start")
	store.Handler(ctx).OnAdd(syncNodePort(), false)
	next("after a policy was compiled")
	if diff := cmp.Diff([]string{"Kubernetes-HostPort", "Kubernetes-NodePort"}, store.Snapshot().SynchronousTypes(testPlugins)); diff != "" {
		t.Errorf("synchronous types when the request is handled (-want,+got):\n%s", diff)
	}
}
