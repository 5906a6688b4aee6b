package cloudnet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// alibabaResults is the box's stand-in for Terway and the DNAT controller,
// started once for the rest of the run by startAlibaba.
var alibabaResults standIn[cloudbox.AlibabaResults]

// startAlibaba starts the box's Alibaba controllers against the suite's cluster,
// once, for the rest of the run.
func startAlibaba(t *testing.T) *cloudbox.AlibabaResults {
	t.Helper()
	return alibabaResults.get(t, "the box's Alibaba controllers", cloudbox.StartAlibabaResults)
}

// networkStatusOf returns pod's network-status, nil when it has none or it does not parse.
func networkStatusOf(p *corev1.Pod) *networkstatus.NetworkStatus {
	st, err := networkstatus.StatusFromPod(p)
	if err != nil {
		return nil
	}
	return st
}

// TestAlibabaEIPAndNATGW, as deployed (two replicas, the shipped RBAC): an AlibabaCloud-EIP
// game server is Ready with the EIP Terway's stand-in reports in the pod's PodEIP, an
// AlibabaCloud-NATGW one with both ports the DNAT controller's stand-in maps in its PodDNAT,
// and keeps it when network-disabled is set (OKG's rule for these types); while the stand-in writes nothing (an EIP quota), a new EIP game server stays Waiting, and
// it is Ready once the stand-in answers again. The answer comes through the network
// controller's watch on PodEIP and PodDNAT, not a retry timer: the namespace's policy spaces
// retries ten minutes apart, and every wait here is a minute.
func TestAlibabaEIPAndNATGW(t *testing.T) {
	a := startAlibaba(t)
	ns := newNamespace(t, "alibaba-results", nil)
	// Retries ten minutes apart: a network Ready within the test's minute was made Ready by
	// the watch on the controllers' answers, not by a retry.
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: slow-retries, namespace: %s}
spec:
  plugins: ["AlibabaCloud-EIP", "AlibabaCloud-NATGW"]
  failureMode: Asynchronous
  retry: {window: 30m, interval: 10m, maxInterval: 10m}
`, ns))
	time.Sleep(2 * time.Second) // the replicas' policy caches (a second, docs/policy.md)
	createStatefulSet(t, ns, "eip", 1, gamePodTemplate("eip", alibabacloud.EIPName, `[{"name":"ReleaseStrategy","value":"Follow"}]`))
	createStatefulSet(t, ns, "dnat", 1, gamePodTemplate("dnat", alibabacloud.NATGWName, `[{"name":"Ports","value":"7777,7778"},{"name":"Protocol","value":"udp"}]`))
	readyWith := func(app, name string, want func(*networkstatus.NetworkStatus) error) {
		t.Helper()
		eventually(t, time.Minute, fmt.Sprintf("%s Ready with its controller's answer", name), func(ctx context.Context) (bool, error) {
			pods, err := listPods(ctx, ns, app)
			if err != nil {
				return false, err
			}
			for i := range pods {
				if pods[i].Name != name {
					continue
				}
				st := networkStatusOf(&pods[i])
				if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
					return false, nil
				}
				return true, want(st)
			}
			return false, nil
		})
	}
	readyWith("eip", "eip-0", func(st *networkstatus.NetworkStatus) error {
		if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != cloudbox.AlibabaEIPAddress(ns, "eip-0") {
			return fmt.Errorf("external addresses %+v, want the EIP %s", st.ExternalAddresses, cloudbox.AlibabaEIPAddress(ns, "eip-0"))
		}
		return nil
	})
	readyWith("dnat", "dnat-0", func(st *networkstatus.NetworkStatus) error {
		if len(st.ExternalAddresses) != 2 || st.ExternalAddresses[1].IP != cloudbox.DNATExternalIP || st.ExternalAddresses[1].Ports[0].Port.String() != "513" ||
			st.ExternalAddresses[1].Ports[0].Protocol != corev1.ProtocolUDP {
			return fmt.Errorf("external addresses %+v, want two on %s, the second 513/UDP", st.ExternalAddresses, cloudbox.DNATExternalIP)
		}
		return nil
	})

	// network-disabled changes nothing for these types (OKG's rule: the controllers have no
	// switch): the UPDATE that sets it keeps the Ready network.
	disabled, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "dnat-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := networkStatusOf(disabled); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) != 2 {
		t.Errorf("dnat-0 after network-disabled: %+v, want its Ready network kept", st)
	}

	a.SetFail(true)
	scaleStatefulSet(t, ns, "eip", 2)
	eventually(t, time.Minute, "eip-1 running and Waiting while the controller writes nothing", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "eip")
		if err != nil {
			return false, err
		}
		for i := range pods {
			if st := networkStatusOf(&pods[i]); pods[i].Name == "eip-1" && pods[i].Status.PodIP != "" && st != nil {
				if st.CurrentNetworkState == networkstatus.NetworkReady {
					return false, fmt.Errorf("eip-1 Ready without an answer: %+v", st)
				}
				return st.CurrentNetworkState == networkstatus.NetworkWaiting, nil
			}
		}
		return false, nil
	})
	a.SetFail(false)
	readyWith("eip", "eip-1", func(st *networkstatus.NetworkStatus) error {
		if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != cloudbox.AlibabaEIPAddress(ns, "eip-1") {
			return fmt.Errorf("external addresses %+v, want the EIP %s", st.ExternalAddresses, cloudbox.AlibabaEIPAddress(ns, "eip-1"))
		}
		return nil
	})
}

// TestAlibabaResultWriters: with config/alibabacloud/result-writers.yaml applied, a namespace
// owner whose Role lets them write PodEIPs can neither create one nor rewrite the status of
// one (which would make a pod's network Ready with an address of their choosing), while the
// box's Terway stand-in, a kube-system ServiceAccount, still answers: a new AlibabaCloud-EIP
// game server is Ready with its EIP.
func TestAlibabaResultWriters(t *testing.T) {
	ctx := context.Background()
	startAlibaba(t)
	applyAdmissionPolicy(t, "../../config/alibabacloud/result-writers.yaml")
	ns := newNamespace(t, "alibaba-writers", nil)
	asOwner := ownerOf(t, ns, alibabacloud.GroupVersion.Group)
	dyn := dynamic.NewForConfigOrDie(asOwner).Resource(alibabacloud.GroupVersion.WithResource("podeips")).Namespace(ns)
	forged := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"allocationID": "forged"}}}
	forged.SetGroupVersionKind(alibabacloud.GroupVersion.WithKind(alibabacloud.PodEIPKind))
	forged.SetName("eip-0")
	// The policy takes effect once the API server has loaded it: poll until refused.
	eventually(t, 30*time.Second, "the namespace owner's PodEIP refused", func(ctx context.Context) (bool, error) {
		_, err := dyn.Create(ctx, forged.DeepCopy(), metav1.CreateOptions{})
		if err == nil {
			_ = dyn.Delete(ctx, forged.GetName(), metav1.DeleteOptions{})
			return false, nil
		}
		return apierrors.IsForbidden(err), nil
	})
	createStatefulSet(t, ns, "eip", 1, gamePodTemplate("eip", alibabacloud.EIPName, `[]`))
	// Nor can they rewrite the answer of an existing PodEIP, through its status.
	eventually(t, time.Minute, "the stand-in's PodEIP of eip-0 written", func(ctx context.Context) (bool, error) {
		_, err := dyn.Get(ctx, "eip-0", metav1.GetOptions{})
		return err == nil, nil
	})
	got, err := dyn.Get(ctx, "eip-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Object["status"] = map[string]any{"eipAddress": "192.0.2.66", "privateIPAddress": "10.0.0.1"}
	if _, err := dyn.UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace owner's status update of a PodEIP: %v, want Forbidden", err)
	}
	eventually(t, time.Minute, "eip-0 Ready with the stand-in's EIP", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "eip")
		if err != nil || len(pods) != 1 {
			return false, err
		}
		st := networkStatusOf(&pods[0])
		return st != nil && st.CurrentNetworkState == networkstatus.NetworkReady && len(st.ExternalAddresses) == 1 &&
			st.ExternalAddresses[0].IP == cloudbox.AlibabaEIPAddress(ns, "eip-0"), nil
	})
}

// applyAdmissionPolicy creates the ValidatingAdmissionPolicy and its binding of the file at
// path (two YAML documents), and deletes them when the test ends.
func applyAdmissionPolicy(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), policy) != nil || yaml.UnmarshalStrict([]byte(docs[1]), binding) != nil {
		t.Fatalf("%s: want a ValidatingAdmissionPolicy and its binding", path)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
}

// ownerOf returns a config that acts as the owner of namespace ns, bound to a Role that
// allows everything on the API groups there.
func ownerOf(t *testing.T, ns string, groups ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	const owner = "owner@example.com"
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Rules: []rbacv1.PolicyRule{{APIGroups: groups, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: owner}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "owner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asOwner := rest.CopyConfig(cp.Config)
	asOwner.Impersonate = rest.ImpersonationConfig{UserName: owner}
	return asOwner
}
