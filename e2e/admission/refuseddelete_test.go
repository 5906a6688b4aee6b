package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// ingressConf is the network-conf of the Ingress game servers of these tests (a Host: a rule
// without host is refused by default).
const ingressConf = `[{"name":"Path","value":"/game<id>"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"7777"},` +
	`{"name":"Host","value":"ing<id>.refused-delete.example.com"}]`

// TestRefusedDeleteKeepsTheNetwork: another admission controller (a ValidatingAdmissionPolicy
// that protects game servers in a match, as an OpenKruise PodUnavailableBudget or Kyverno
// would) refuses the DELETE of a NodePort and of an Ingress game server. Validating admission
// runs after the mutating webhook, so anything the webhook did on DELETE would already be
// done: the pod, its Service (same node port) or Ingress, and its Ready network-status must
// all stay. Once the protection is lifted, the DELETE goes through and garbage collection
// removes the network objects when the pod is gone, as with OKG's own plugins.
func TestRefusedDeleteKeepsTheNetwork(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "refused-delete", nil)
	vapName := "protect-in-match-" + ns
	if out, err := kubectl(t, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["pods"]}
  validations:
  - expression: "!has(oldObject.metadata.labels) || !('in-match' in oldObject.metadata.labels)"
    message: "game server is in a match"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
`, vapName, ns), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the ValidatingAdmissionPolicy: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), vapName, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), vapName, metav1.DeleteOptions{})
	})

	for _, tc := range []struct{ app, networkType, conf string }{
		{"np", "Kubernetes-NodePort", nodePortConf},
		{"ing", "Kubernetes-Ingress", ingressConf},
	} {
		tmpl := gamePodTemplate(tc.app, tc.networkType, tc.conf)
		tmpl.Labels["in-match"] = "true"
		createStatefulSet(t, ns, tc.app, 1, tmpl)
	}
	type network struct{ status, service, ingress string }
	read := func(ctx context.Context, name string, withIngress bool) (network, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return network{}, err
		}
		if p.DeletionTimestamp != nil {
			return network{}, fmt.Errorf("pod %s is terminating", name)
		}
		if networkState(p) != networkstatus.NetworkReady {
			return network{}, fmt.Errorf("pod %s network %q, want Ready", name, networkState(p))
		}
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return network{}, err
		}
		n := network{status: p.Annotations[networkstatus.AnnotationNetworkStatus], service: fmt.Sprintf("%s %v", svc.UID, svc.Spec.Ports)}
		if withIngress {
			ing, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return network{}, err
			}
			n.ingress = string(ing.UID)
		}
		return n, nil
	}
	before := map[string]network{}
	for _, name := range []string{"np-0", "ing-0"} {
		eventually(t, time.Minute, name+" network Ready with its objects", func(ctx context.Context) (bool, error) {
			n, err := read(ctx, name, name == "ing-0")
			before[name] = n
			return err == nil, err
		})
	}

	// The API server compiles a new ValidatingAdmissionPolicy and its binding in the
	// background: wait until a dry-run DELETE is refused.
	eventually(t, 30*time.Second, "the ValidatingAdmissionPolicy in force", func(ctx context.Context) (bool, error) {
		err := cs.CoreV1().Pods(ns).Delete(ctx, "np-0", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "game server is in a match"), nil
	})
	for _, name := range []string{"np-0", "ing-0"} {
		err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil || !strings.Contains(err.Error(), "game server is in a match") {
			t.Fatalf("DELETE of %s: %v, want the ValidatingAdmissionPolicy's refusal", name, err)
		}
	}
	// Garbage collection and the manager's controllers act within seconds; give them time
	// to do harm, then check nothing changed.
	time.Sleep(5 * time.Second)
	for _, name := range []string{"np-0", "ing-0"} {
		after, err := read(ctx, name, name == "ing-0")
		if err != nil {
			t.Errorf("after the refused DELETE of %s: %v; want the pod, its Ready network and its objects kept", name, err)
			continue
		}
		if after != before[name] {
			t.Errorf("after the refused DELETE of %s the network changed:\n before %+v\n after  %+v", name, before[name], after)
		}
	}

	// Protection lifted: the DELETE goes through, the objects go with the pod.
	if err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, vapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pods deletable once unprotected", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"np-0", "ing-0"} {
			if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	eventually(t, time.Minute, "Services and Ingress removed by garbage collection once the pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false, err
		}
		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(svcs.Items) == 0 && len(ings.Items) == 0, nil
	})
}
