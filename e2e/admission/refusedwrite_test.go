package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestRefusedWriteKeepsReadyNetwork: a Ready NodePort game server whose Service differs from
// what the plugin wants in a cosmetic way (its owner reference was removed), at a time when
// every write of a Service in its namespace is refused by a ValidatingAdmissionPolicy, keeps
// its network Ready at its next UPDATE: the refused patch of an object that still exists is
// not a broken network. The pod gets a warning and the unverified mark, no retry state, and
// once the refusal is lifted the network controller's recheck brings the Service up to date
// and clears the mark.
func TestRefusedWriteKeepsReadyNetwork(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "refusedwrite", nil)
	createStatefulSet(t, ns, "gs", 1, gamePodTemplate("gs", "Kubernetes-NodePort", nodePortConf))
	eventually(t, time.Minute, "gs-0 network Ready", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return networkState(got) == networkstatus.NetworkReady, nil
	})
	// The cosmetic difference: the Service loses its owner reference to the pod.
	if _, err := cs.CoreV1().Services(ns).Patch(ctx, "gs-0", types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every Service write in the namespace is refused from now on.
	name := "freeze-" + ns
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "services are frozen"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the freeze in force", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(ns).Patch(ctx, "probe", types.MergePatchType, []byte(`{"metadata":{"labels":{"t":"`+fmt.Sprint(time.Now().UnixNano())+`"}}}`), metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), "services are frozen"), nil
	})

	// An unrelated UPDATE of the pod: the plugin's patch of the Service is refused.
	author := newWarningsClient(t)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"game.kruise.io/opsState": "Maintaining"}}})
	got, err := author.CoreV1().Pods(ns).Patch(ctx, "gs-0", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label gs-0: %v", err)
	}
	if s := networkState(got); s != networkstatus.NetworkReady {
		t.Errorf("network state after a refused Service patch = %s, want Ready (kept)", s)
	}
	if _, ok := got.Annotations[networkretry.Annotation]; ok {
		t.Errorf("retry state %s written, want none: no window starts on a refused write", got.Annotations[networkretry.Annotation])
	}
	if _, ok := got.Annotations[networkretry.UnverifiedAnnotation]; !ok {
		t.Errorf("no %s mark, want one so that the check is repeated", networkretry.UnverifiedAnnotation)
	}
	if !author.saw("the write was not accepted") || !author.saw("services are frozen") {
		t.Errorf("admission warnings %q, want one saying the write was not accepted, and why", author.warnings)
	}
	// A few rechecks later, still Ready and no window.
	time.Sleep(6 * time.Second)
	got, err = cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := networkState(got); s != networkstatus.NetworkReady || got.Annotations[networkretry.Annotation] != "" {
		t.Errorf("after rechecks under the freeze: state %s, retry state %q; want Ready and none", s, got.Annotations[networkretry.Annotation])
	}

	// The freeze lifted: the recheck repairs the Service and clears the mark.
	if err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the Service repaired and the mark cleared", func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, marked := p.Annotations[networkretry.UnverifiedAnnotation]
		return len(svc.OwnerReferences) == 1 && !marked && networkState(p) == networkstatus.NetworkReady, nil
	})
}
