package cloudnet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestSharedPortAsDeployed, as deployed (two replicas, the shipped RBAC) with the cloud in a
// box: two AlibabaCloud-SLB-SharedPort game servers join one shared Service named after the
// SLB, made without owners, and are Ready on the SLB's address and the shared port 7777 once
// the box gives the Service its address; a game server of another namespace naming the
// same SLB is not given it: it stays NotReady, its last error the refusal (reason
// NotAllowed), and no Service is written in its namespace. An AlibabaCloud-NLB-SharedPort game
// server is Ready at its NLB's hostname (the box's NLB-class answer).
func TestSharedPortAsDeployed(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	ns := newNamespace(t, "shared-port", nil)
	const id = "shared-slb"
	conf := fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, id)
	createStatefulSet(t, ns, "lobby", 2, gamePodTemplate("lobby", alibabacloud.SLBSharedPortName, conf))
	eventually(t, time.Minute, "both game servers Ready on the shared SLB", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "lobby")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			st, _ := networkstatus.StatusFromPod(&pods[i])
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != c.Address(id) || st.ExternalAddresses[0].Ports[0].Port.String() != "7777" {
				return false, fmt.Errorf("%s: external addresses %+v, want %s:7777", pods[i].Name, st.ExternalAddresses, c.Address(id))
			}
		}
		return true, nil
	})
	svc, err := cs.CoreV1().Services(ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.OwnerReferences) != 0 || svc.Spec.Selector[alibabacloud.LabelLBID] != id {
		t.Errorf("shared Service: owners %v, selector %v; want none, the SLB's label", svc.OwnerReferences, svc.Spec.Selector)
	}

	// AlibabaCloud-NLB-SharedPort: one Service of the NLB class, Ready at its hostname.
	const nlb = "shared-nlb"
	createStatefulSet(t, ns, "party", 1, gamePodTemplate("party", alibabacloud.NLBSharedPortName,
		fmt.Sprintf(`[{"name":"NlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, nlb)))
	eventually(t, time.Minute, "the NLB-SharedPort game server Ready at the NLB's hostname", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "party")
		if err != nil || len(pods) != 1 {
			return false, err
		}
		st, _ := networkstatus.StatusFromPod(&pods[0])
		if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, nil
		}
		if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].EndPoint != cloudbox.NLBHostname(nlb) || st.ExternalAddresses[0].Ports[0].Port.String() != "7777" {
			return false, fmt.Errorf("party-0: external addresses %+v, want %s:7777", st.ExternalAddresses, cloudbox.NLBHostname(nlb))
		}
		return true, nil
	})

	if nlbSvc, err := cs.CoreV1().Services(ns).Get(ctx, nlb, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if nlbSvc.Spec.LoadBalancerClass == nil || *nlbSvc.Spec.LoadBalancerClass != "alibabacloud.com/nlb" || len(nlbSvc.OwnerReferences) != 0 {
		t.Errorf("shared NLB Service: class %v, owners %v; want alibabacloud.com/nlb, none", nlbSvc.Spec.LoadBalancerClass, nlbSvc.OwnerReferences)
	}

	other := newNamespace(t, "shared-port-other", nil)
	createStatefulSet(t, other, "raid", 1, gamePodTemplate("raid", alibabacloud.SLBSharedPortName, conf))
	eventually(t, time.Minute, "the other namespace's game server refused the SLB", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, other, "raid")
		if err != nil || len(pods) != 1 {
			return false, err
		}
		if st, _ := networkstatus.StatusFromPod(&pods[0]); st != nil && st.CurrentNetworkState == networkstatus.NetworkReady {
			return false, fmt.Errorf("raid-0 Ready on another namespace's SLB")
		}
		var state struct {
			LastError struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"lastError"`
		}
		_ = json.Unmarshal([]byte(pods[0].Annotations["policy.game.kruise.io/network-retry"]), &state)
		return state.LastError.Reason == "NotAllowed" && strings.Contains(state.LastError.Message, ns+"/"+id), nil
	})
	if svcs, err := cs.CoreV1().Services(other).List(ctx, metav1.ListOptions{}); err != nil || len(svcs.Items) != 0 {
		t.Errorf("Services in %s: %d (%v), want none", other, len(svcs.Items), err)
	}
}
