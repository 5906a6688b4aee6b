package okgvalidation

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/okg-extensions/network-plugin-policy/pkg/webhook/gameserverset"
)

func okgConfiguration(conds ...admissionregistrationv1.MatchCondition) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultConfiguration},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "other.kb.io"}, {Name: EntryName, MatchConditions: conds}},
	}
}

func conditionsOf(t *testing.T, c client.Client) []admissionregistrationv1.MatchCondition {
	t.Helper()
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: DefaultConfiguration}, got); err != nil {
		t.Fatal(err)
	}
	if got.Webhooks[0].MatchConditions != nil {
		t.Errorf("the other entry was touched: %v", got.Webhooks[0].MatchConditions)
	}
	return got.Webhooks[1].MatchConditions
}

// ownConfiguration is this manager's ValidatingWebhookConfiguration with its GameServerSet
// entry as config/ installs it.
func ownConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "own"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "vnetworkpluginpolicy.policy.game.kruise.io"},
			{Name: gameserverset.WebhookName, MatchConditions: gameserverset.MatchConditions(served)}},
	}
}

func ownConditions(t *testing.T, c client.Client) []admissionregistrationv1.MatchCondition {
	t.Helper()
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "own"}, got); err != nil {
		t.Fatal(err)
	}
	return got.Webhooks[1].MatchConditions
}

// reconciler is a Reconciler over c for both configurations, deciding what *served says,
// with a clock that moves only when the test moves it.
func reconciler(c client.Client, served *[]string, decided *bool, clock *time.Time) *Reconciler {
	return &Reconciler{Client: c, reader: c, ownReader: c, Name: DefaultConfiguration, Own: "own", Manage: true,
		Served: func() ([]string, bool) { return *served, *decided }, now: func() time.Time { return *clock }}
}

var req = reconcile.Request{NamespacedName: types.NamespacedName{Name: DefaultConfiguration}}

// TestReconcileFollowsTheGuard: undecided (before the guard's first look), nothing is written;
// serving, the condition is added to OKG's entry (nothing else of it) and kept, and the own
// entry matches the served types; stepping back, the condition is removed and the own entry
// matches nothing.
func TestReconcileFollowsTheGuard(t *testing.T) {
	other := admissionregistrationv1.MatchCondition{Name: "okg-own", Expression: "true"}
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(other), ownConfiguration()).Build()
	serving, decided, clock := served, false, time.Unix(1000, 0)
	r := reconciler(c, &serving, &decided, &clock)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other}, conditionsOf(t, c)); diff != "" {
		t.Errorf("undecided: OKG's conditions (-want,+got):\n%s", diff)
	}
	decided = true
	for range 2 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other, Condition(served)}, conditionsOf(t, c)); diff != "" {
			t.Errorf("OKG's conditions (-want,+got):\n%s", diff)
		}
		if diff := cmp.Diff(gameserverset.MatchConditions(served), ownConditions(t, c)); diff != "" {
			t.Errorf("own conditions (-want,+got):\n%s", diff)
		}
	}
	serving = nil
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other}, conditionsOf(t, c)); diff != "" {
		t.Errorf("OKG's conditions after stepping back (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(gameserverset.MatchConditions(nil), ownConditions(t, c)); diff != "" {
		t.Errorf("own conditions after stepping back (-want,+got):\n%s", diff)
	}
}

// TestReconcileManageOff: with the flag off, a condition an earlier run left is removed and
// the own entry matches nothing.
func TestReconcileManageOff(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(Condition(served)), ownConfiguration()).Build()
	serving, decided, clock := served, true, time.Unix(1000, 0)
	r := reconciler(c, &serving, &decided, &clock)
	r.Manage = false
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := conditionsOf(t, c); len(got) != 0 {
		t.Errorf("OKG's conditions %v with the flag off, want none", got)
	}
	if diff := cmp.Diff(gameserverset.MatchConditions(nil), ownConditions(t, c)); diff != "" {
		t.Errorf("own conditions with the flag off (-want,+got):\n%s", diff)
	}
}

// TestReconcileBoundsItsWrites: a replica writes OKG's configuration at most writeBurst times
// at once and then once every writeInterval (replicas whose guards disagree cannot undo each
// other faster), and replaces another version's condition at most once every
// replaceInterval.
func TestReconcileBoundsItsWrites(t *testing.T) {
	stale := admissionregistrationv1.MatchCondition{Name: ConditionName, Expression: "true"}
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(stale), ownConfiguration()).Build()
	serving, decided, clock := served, true, time.Unix(1000, 0)
	r := reconciler(c, &serving, &decided, &clock)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{Condition(served)}, conditionsOf(t, c)); diff != "" {
		t.Fatalf("another version's condition not replaced (-want,+got):\n%s", diff)
	}
	// A peer of the other version writes its own back: not replaced again before 5 minutes.
	setConditions(t, c, stale)
	clock = clock.Add(time.Minute)
	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := conditionsOf(t, c); !cmp.Equal(got, []admissionregistrationv1.MatchCondition{stale}) || res.RequeueAfter <= 0 {
		t.Errorf("replaced again within %v: %v (requeue %v)", replaceInterval, got, res.RequeueAfter)
	}
	// A peer that steps back removes it again and again: put back at once writeBurst times,
	// then once every writeInterval.
	clock = clock.Add(replaceInterval)
	r.writes = nil
	for i := range writeBurst + 1 {
		setConditions(t, c)
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		back := len(conditionsOf(t, c)) == 1
		if i < writeBurst && !back {
			t.Errorf("removal %d not put back at once", i+1)
		}
		if i == writeBurst && (back || res.RequeueAfter <= 0 || res.RequeueAfter > writeInterval) {
			t.Errorf("removal %d put back at once (%v) or requeued after %v: want a wait of at most %v", i+1, back, res.RequeueAfter, writeInterval)
		}
	}
	clock = clock.Add(writeInterval)
	if _, err := r.Reconcile(context.Background(), req); err != nil || len(conditionsOf(t, c)) != 1 {
		t.Errorf("not put back after %v: %v, %v", writeInterval, conditionsOf(t, c), err)
	}
}

// setConditions sets OKG's entry's matchConditions as a peer would.
func setConditions(t *testing.T, c client.Client, conds ...admissionregistrationv1.MatchCondition) {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: DefaultConfiguration}, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks[1].MatchConditions = conds
	if err := c.Update(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestReconcileWithoutOKG: no configuration, or one without the GameServerSet entry, is left
// alone.
func TestReconcileWithoutOKG(t *testing.T) {
	withoutEntry := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultConfiguration},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "other.kb.io"}},
	}
	for name, objs := range map[string][]client.Object{
		"no configuration":                      nil,
		"a configuration without the GSS entry": {withoutEntry},
	} {
		t.Run(name, func(t *testing.T) {
			writes := 0
			c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					writes++
					return c.Patch(ctx, obj, patch, opts...)
				},
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					writes++
					return c.Update(ctx, obj, opts...)
				},
			}).Build()
			serving, decided, clock := served, true, time.Unix(1000, 0)
			res, err := reconciler(c, &serving, &decided, &clock).Reconcile(context.Background(), req)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if writes != 0 {
				t.Errorf("%d writes, want none", writes)
			}
			if res.RequeueAfter != resync {
				t.Errorf("requeue after %v, want the resync, %v (OKG may be installed later)", res.RequeueAfter, resync)
			}
		})
	}
}

func TestRemoveCondition(t *testing.T) {
	other := admissionregistrationv1.MatchCondition{Name: "okg-own", Expression: "true"}
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(other, Condition(served))).Build()
	removed, err := RemoveCondition(context.Background(), c, DefaultConfiguration)
	if err != nil || !removed {
		t.Fatalf("RemoveCondition = %v, %v; want true, nil", removed, err)
	}
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other}, conditionsOf(t, c)); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
	if removed, err := RemoveCondition(context.Background(), c, DefaultConfiguration); err != nil || removed {
		t.Errorf("second RemoveCondition = %v, %v; want false, nil", removed, err)
	}
	if removed, err := RemoveCondition(context.Background(), fake.NewClientBuilder().Build(), DefaultConfiguration); err != nil || removed {
		t.Errorf("RemoveCondition without OKG = %v, %v; want false, nil", removed, err)
	}
}

// TestReconcileLostRaceIsAConflict: a write refused because the configuration changed since
// it was read (another replica put the condition back first at OKG's start: the API server
// answers the failed JSON patch test with 422, or a conflict) is counted as a conflict, not
// an error, and read again soon; any other refusal is an error.
func TestReconcileLostRaceIsAConflict(t *testing.T) {
	// What the API server answers a JSON patch whose test fails (k8s.io/apiserver's patch
	// handler), as the client decodes it.
	testFailed := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /metadata/resourceVersion failed: test failed", 0, false)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, DefaultConfiguration,
		field.ErrorList{field.Invalid(field.NewPath("webhooks").Index(1).Child("matchConditions").Index(0).Child("expression"), "x", "compilation failed")})
	for name, tc := range map[string]struct {
		err        error
		wantResult string
		wantErr    bool
	}{
		"the resourceVersion test failed (422)": {err: testFailed, wantResult: "conflict"},
		"a conflict (409)":                      {err: apierrors.NewConflict(schema.GroupResource{Resource: "validatingwebhookconfigurations"}, DefaultConfiguration, errors.New("changed")), wantResult: "conflict"},
		"the patched object invalid (422)":      {err: invalid, wantResult: "error", wantErr: true},
		"forbidden":                             {err: apierrors.NewForbidden(schema.GroupResource{Resource: "validatingwebhookconfigurations"}, DefaultConfiguration, errors.New("no")), wantResult: "error", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(okgConfiguration(), ownConfiguration()).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if obj.GetName() == DefaultConfiguration {
						return tc.err
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			}).Build()
			serving, decided, clock := served, true, time.Unix(1000, 0)
			r := reconciler(c, &serving, &decided, &clock)
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			r.Metrics = m
			res, err := r.Reconcile(context.Background(), req)
			if (err != nil) != tc.wantErr {
				t.Errorf("Reconcile error = %v, want error %t", err, tc.wantErr)
			}
			if !tc.wantErr && res.RequeueAfter != conflictRequeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, conflictRequeue)
			}
			for _, result := range []string{"written", "conflict", "error"} {
				want := 0.0
				if result == tc.wantResult {
					want = 1
				}
				if got := testutil.ToFloat64(m.Repairs.WithLabelValues(result)); got != want {
					t.Errorf("writes{result=%q} = %v, want %v", result, got, want)
				}
			}
		})
	}
}

// TestReconcileEndlessConflictsAreAnError: a 422 of a race's shape that comes back at every
// write is not a race: after maxConflicts of them in a row, the next is an error (the
// workqueue's backoff applies), not a silent loop of writes.
func TestReconcileEndlessConflictsAreAnError(t *testing.T) {
	testFailed := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "denied", 0, false)
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(), ownConfiguration()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == DefaultConfiguration {
				return testFailed
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	serving, decided, clock := served, true, time.Unix(1000, 0)
	r := reconciler(c, &serving, &decided, &clock)
	for i := range maxConflicts + 1 {
		clock = clock.Add(time.Minute) // past the write limiter
		_, err := r.Reconcile(context.Background(), req)
		if last := i == maxConflicts; (err != nil) != last {
			t.Errorf("write %d: error %v, want an error only at write %d", i+1, err, maxConflicts+1)
		}
	}
}
