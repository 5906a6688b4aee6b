package okgvalidation

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// TestReconcilePutsTheConditionBackAndRemovesIt: the condition is added to OKG's entry (and
// nothing else), kept, and removed when the manager serves no type (stepping back).
func TestReconcilePutsTheConditionBackAndRemovesIt(t *testing.T) {
	other := admissionregistrationv1.MatchCondition{Name: "okg-own", Expression: "true"}
	c := fake.NewClientBuilder().WithObjects(okgConfiguration(other)).Build()
	serving := served
	r := &Reconciler{Client: c, reader: c, Name: DefaultConfiguration, Served: func() []string { return serving }}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: DefaultConfiguration}}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other, Condition(served)}, conditionsOf(t, c)); diff != "" {
			t.Errorf("conditions (-want,+got):\n%s", diff)
		}
	}
	serving = nil
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{other}, conditionsOf(t, c)); diff != "" {
		t.Errorf("conditions after stepping back (-want,+got):\n%s", diff)
	}
}

// TestReconcileWithoutOKG: no configuration, or one without the GameServerSet entry, is left
// alone.
func TestReconcileWithoutOKG(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	r := &Reconciler{Client: c, reader: c, Name: DefaultConfiguration, Served: func() []string { return served }}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: DefaultConfiguration}}); err != nil {
		t.Errorf("no configuration: %v", err)
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
