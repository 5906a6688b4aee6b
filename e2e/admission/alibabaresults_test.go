package admission

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

var (
	// alibabaResults is the box's stand-in for Terway and the DNAT controller; startAlibaba
	// starts it once.
	alibabaResults     *cloudbox.AlibabaResults
	alibabaResultsOnce sync.Once
)

func startAlibaba(t *testing.T) *cloudbox.AlibabaResults {
	t.Helper()
	alibabaResultsOnce.Do(func() {
		a := &cloudbox.AlibabaResults{}
		if err := cloudbox.StartAlibabaResults(context.Background(), cp.Config, a); err != nil {
			t.Fatalf("start the box's Alibaba controllers: %v", err)
		}
		alibabaResults = a
	})
	if alibabaResults == nil {
		t.Fatal("the box's Alibaba controllers did not start")
	}
	return alibabaResults
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
// AlibabaCloud-NATGW one with both ports the DNAT controller's stand-in maps in its PodDNAT;
// while the stand-in writes nothing (an EIP quota), a new EIP game server stays Waiting, and
// it is Ready once the stand-in answers again. The answer comes through the network
// controller's watch on PodEIP and PodDNAT, not a retry timer.
func TestAlibabaEIPAndNATGW(t *testing.T) {
	a := startAlibaba(t)
	ns := newNamespace(t, "alibaba-results", nil)
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
