package policyapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/informers/externalversions"
)

// TestClientsetRoundTrip writes a policy with every field through the generated clientset,
// reads it back unchanged, writes its status through the status subresource, and sees it in
// the generated informer and lister.
func TestClientsetRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	ns := createNamespace(t, "roundtrip")
	cs := versioned.NewForConfigOrDie(cp.Config)

	factory := externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithNamespace(ns))
	informer := factory.Policy().V1alpha1().NetworkPluginPolicies()
	lister := informer.Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers, which stop on ctx

	mode := policyv1alpha1.FailureModeAsynchronous
	action := policyv1alpha1.ExhaustedActionRecreate
	spec := policyv1alpha1.NetworkPluginPolicySpec{
		Plugins:     []string{"Kubernetes-NodePort", "NLB-Network"},
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"game.kruise.io/owner-gss": "lobby"}},
		MatchConditions: []policyv1alpha1.MatchCondition{
			{Name: "not-canary", Expression: "!('canary' in object.metadata.labels)"},
		},
		Priority:              ptr.To[int32](10),
		FailureMode:           &mode,
		FailureModeExpression: ptr.To("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'"),
		Timeout:               &metav1.Duration{Duration: 5 * time.Second},
		ReadinessGate:         ptr.To(true),
		Retry: &policyv1alpha1.RetryPolicy{
			Window:          &metav1.Duration{Duration: 5 * time.Minute},
			Interval:        &metav1.Duration{Duration: 5 * time.Second},
			MaxInterval:     &metav1.Duration{Duration: time.Minute},
			ExhaustedAction: &action,
		},
	}
	created, err := cs.PolicyV1alpha1().NetworkPluginPolicies(ns).Create(ctx, &policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lb-async"},
		Spec:       spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := cs.PolicyV1alpha1().NetworkPluginPolicies(ns).Get(ctx, "lb-async", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if diff := cmp.Diff(spec, got.Spec); diff != "" {
		t.Errorf("spec after round trip (-sent,+read):\n%s", diff)
	}

	meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{
		Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: policyv1alpha1.ReasonAccepted, Message: "every expression compiled", ObservedGeneration: created.Generation,
	})
	got.Status.ObservedGeneration = created.Generation
	got.Status.Warnings = []string{"a warning"}
	updated, err := cs.PolicyV1alpha1().NetworkPluginPolicies(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if c := meta.FindStatusCondition(updated.Status.Conditions, policyv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition after UpdateStatus = %+v, want True", c)
	}
	if updated.Generation != created.Generation {
		t.Errorf("a status write changed generation %d -> %d", created.Generation, updated.Generation)
	}

	// The informer and lister see the object at its latest resourceVersion.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p, err := lister.NetworkPluginPolicies(ns).Get("lb-async")
		return err == nil && p.ResourceVersion == updated.ResourceVersion, nil
	})
	if err != nil {
		t.Fatalf("lister never saw resourceVersion %s: %v", updated.ResourceVersion, err)
	}
	all, err := lister.List(labels.Everything())
	if err != nil || len(all) != 1 {
		t.Fatalf("lister List = %d items, %v; want 1", len(all), err)
	}
	if diff := cmp.Diff(updated.Status, all[0].Status); diff != "" {
		t.Errorf("status seen by the lister (-written,+listed):\n%s", diff)
	}
}
