package cloudnet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// alibabaOperators is the box's stand-in for Alibaba's NLB and EIP operators,
// started once for the rest of the run by startAlibabaOperators.
var alibabaOperators standIn[cloudbox.AlibabaOperators]

// startAlibabaOperators starts the box's Alibaba operators against the suite's cluster,
// once, for the rest of the run.
func startAlibabaOperators(t *testing.T) *cloudbox.AlibabaOperators {
	t.Helper()
	return alibabaOperators.get(t, "the box's Alibaba operators", cloudbox.StartAlibabaOperators)
}

// TestAutoNLBsV2AsDeployed, as deployed (two replicas, the shipped RBAC; the box's cloud and
// its stand-ins for Alibaba's EIP and NLB operators, failing at first: the game servers wait
// NotReady with the EIP objects made and no allocation id; then slow): two
// AlibabaCloud-AutoNLBs-V2 game servers of a GameServerSet with RetainNLBOnDelete false carry
// OKG's finalizer and turn Ready on their ordinals' listener ports of the NLB the operators
// made from the manager's EIP and NLB objects (no owner, the GameServerSet's pool labels),
// each through its own Service. A scale-down lets its game server go at once and keeps the
// objects; once the GameServerSet is deleted, the last game server goes after its Service,
// and the NLB and EIP objects with it.
func TestAutoNLBsV2AsDeployed(t *testing.T) {
	ctx := context.Background()
	startCloud(t)
	ops := startAlibabaOperators(t)
	ops.SetFail(true)
	ops.SetDelay(2 * time.Second)
	t.Cleanup(func() { ops.SetDelay(0); ops.SetFail(false) })
	ns := newNamespace(t, "auto-nlbs-v2", nil)
	const set = "anlb2"
	conf := `[{"name":"PortProtocols","value":"7777/UDP"},{"name":"ZoneMaps","value":"vpc-1@cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1001"},{"name":"ReserveNlbNum","value":"0"},{"name":"RetainNLBOnDelete","value":"false"}]`
	var params []any
	for _, p := range [][2]string{{"PortProtocols", "7777/UDP"}, {"ZoneMaps", "vpc-1@cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"}, {"MinPort", "1000"}, {"MaxPort", "1001"}, {"ReserveNlbNum", "0"}, {"RetainNLBOnDelete", "false"}} {
		params = append(params, map[string]any{"name": p[0], "value": p[1]})
	}
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": set, "namespace": ns},
		"spec":     map[string]any{"replicas": int64(2), "network": map[string]any{"networkType": alibabacloud.AutoNLBsV2Name, "networkConf": params}},
	}}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	gssClient := dyn.Resource(schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}).Namespace(ns)
	if _, err := gssClient.Create(ctx, gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the GameServerSet: %v", err)
	}
	tmpl := gamePodTemplate(set, alibabacloud.AutoNLBsV2Name, conf)
	tmpl.Labels["game.kruise.io/owner-gss"] = set
	createStatefulSet(t, ns, set, 2, tmpl)
	host := cloudbox.NLBHostname(cloudbox.NLBID(ns, set+"-bgp-0"))
	eipsClient := dyn.Resource(alibabacloud.EIPGVK.GroupVersion().WithResource("eips")).Namespace(ns)
	eventually(t, 2*time.Minute, "while the operators fail: the EIP objects made, the game servers NotReady", func(ctx context.Context) (bool, error) {
		eips, err := eipsClient.List(ctx, metav1.ListOptions{})
		if err != nil || len(eips.Items) == 0 {
			return false, err
		}
		pods, err := listPods(ctx, ns, set)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if st := networkStatusOf(&pods[i]); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(3 * time.Second)
	if nlbs, err := dyn.Resource(alibabacloud.NLBGVK.GroupVersion().WithResource("nlbs")).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil || len(nlbs.Items) != 0 {
		t.Fatalf("NLB objects made before the EIPs have allocation ids: %d (%v)", len(nlbs.Items), err)
	}
	ops.SetFail(false)
	eventually(t, 3*time.Minute, "two AutoNLBs-V2 game servers Ready on their ordinals' ports of the operators' NLB", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, set)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if !slices.Contains(pods[i].Finalizers, alibabacloud.FinalizerDeleteNLB) {
				return false, fmt.Errorf("%s has no finalizer %s", pods[i].Name, alibabacloud.FinalizerDeleteNLB)
			}
			st := networkStatusOf(&pods[i])
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			want := 1000
			if pods[i].Name == set+"-1" {
				want = 1001
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].EndPoint != host+"/BGP" ||
				len(st.ExternalAddresses[0].Ports) != 1 || st.ExternalAddresses[0].Ports[0].Port.IntValue() != want {
				return false, fmt.Errorf("%s: external addresses %+v, want %s/BGP on %d", pods[i].Name, st.ExternalAddresses, host, want)
			}
		}
		return true, nil
	})
	objects := func(ctx context.Context, gvk schema.GroupVersionKind, resource string) ([]string, error) {
		list, err := dyn.Resource(gvk.GroupVersion().WithResource(resource)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, u := range list.Items {
			if len(u.GetOwnerReferences()) != 0 || u.GetLabels()[alibabacloud.LabelNLBPoolGSS]+u.GetLabels()[alibabacloud.LabelEIPPoolGSS] != set {
				return nil, fmt.Errorf("%s %s: owners %v, labels %v", gvk.Kind, u.GetName(), u.GetOwnerReferences(), u.GetLabels())
			}
			out = append(out, u.GetName())
		}
		return out, nil
	}
	// OKG's count: the GameServerSet's replicas (2) as the highest ordinal, two game servers
	// an NLB, no spare: NLBs 0 and 1, an EIP per zone each.
	if got, err := objects(ctx, alibabacloud.NLBGVK, "nlbs"); err != nil || fmt.Sprint(got) != "[anlb2-bgp-0 anlb2-bgp-1]" {
		t.Fatalf("NLB objects %v (%v), want anlb2-bgp-0 and anlb2-bgp-1", got, err)
	}
	if got, err := objects(ctx, alibabacloud.EIPGVK, "eips"); err != nil || len(got) != 4 {
		t.Fatalf("EIP objects %v (%v), want one per NLB and zone", got, err)
	}

	// A scale-down: the game server goes at once, the objects stay.
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, set, types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the scaled-down game server gone, its finalizer let go", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, set)
		return err == nil && len(pods) == 1, err
	})
	if got, err := objects(ctx, alibabacloud.NLBGVK, "nlbs"); err != nil || len(got) != 2 {
		t.Fatalf("NLB objects after a scale-down: %v (%v), want them kept", got, err)
	}

	// The GameServerSet deleted: its Services go (the garbage collector), then the game
	// server, and the NLB and EIP objects with it.
	if err := gssClient.Delete(ctx, set, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, set, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the last game server gone, and the NLB and EIP objects with it", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, set)
		if err != nil || len(pods) != 0 {
			return false, err
		}
		nlbs, err := objects(ctx, alibabacloud.NLBGVK, "nlbs")
		if err != nil || len(nlbs) != 0 {
			return false, err
		}
		eips, err := objects(ctx, alibabacloud.EIPGVK, "eips")
		return err == nil && len(eips) == 0, err
	})
}

// TestAlibabaOperatorStatusWriters: with config/alibabacloud/operator-status-writers.yaml
// applied, a namespace owner whose Role lets them write NLB objects may create one but not
// write its status (an NLB id of their choosing, which AlibabaCloud-AutoNLBs-V2 would put game
// servers on), while the box's NLB operator stand-in, a kube-system ServiceAccount, still
// answers.
func TestAlibabaOperatorStatusWriters(t *testing.T) {
	ctx := context.Background()
	startAlibabaOperators(t)
	applyAdmissionPolicy(t, "../../config/alibabacloud/operator-status-writers.yaml")
	ns := newNamespace(t, "nlb-writers", nil)
	asOwner := ownerOf(t, ns, alibabacloud.NLBGVK.Group)
	dyn := dynamic.NewForConfigOrDie(asOwner).Resource(alibabacloud.NLBGVK.GroupVersion().WithResource("nlbs")).Namespace(ns)
	nlb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"zoneMappings": []any{}}}}
	nlb.SetGroupVersionKind(alibabacloud.NLBGVK)
	nlb.SetName("gs-bgp-0")
	if _, err := dyn.Create(ctx, nlb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the namespace owner's NLB object: %v, want it created", err)
	}
	// The policy takes effect once the API server has loaded it: poll until refused.
	eventually(t, 30*time.Second, "the namespace owner's NLB status refused", func(ctx context.Context) (bool, error) {
		got, err := dyn.Get(ctx, nlb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got.Object["status"] = map[string]any{"loadBalancerId": "nlb-of-another-namespace"}
		_, err = dyn.UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return apierrors.IsForbidden(err), nil
	})
	// Before the policy took effect the owner's updates went through; a new object shows the
	// operator still answering.
	nlb.SetName("gs-bgp-1")
	if _, err := dyn.Create(ctx, nlb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the stand-in operator's NLB id written", func(ctx context.Context) (bool, error) {
		got, err := dyn.Get(ctx, nlb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		id, _, _ := unstructured.NestedString(got.Object, "status", "loadBalancerId")
		return id == cloudbox.NLBID(ns, nlb.GetName()), nil
	})
}
