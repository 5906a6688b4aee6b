package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestMultiNLBsAsDeployed: AlibabaCloud-Multi-NLBs game servers of two lines (dx, lt), served
// by the manager as deployed (two replicas, the shipped RBAC), get one Service per line on
// that line's NLB, both on the same listener port, a readiness gate per line, and turn Ready
// once the box's cloud (standing in for Alibaba's NLB controller) has given both Services an
// address, with each line's address and endPoint ("<NLB hostname>/<line>") in the status. No
// listener port is on two Services of one NLB. (kwok, which runs these pods, sets every
// readiness gate True as soon as it sees it: the gates' own meaning, that the cloud
// controller set them, is held by TestMultiNLBsLinesInOneRun.)
func TestMultiNLBsAsDeployed(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "multi-nlbs", nil)
	const dx, lt = "e2e-mnlb-dx", "e2e-mnlb-lt"
	createStatefulSet(t, ns, "mnlb", 2, gamePodTemplate("mnlb", alibabacloud.MultiNLBsName,
		fmt.Sprintf(`[{"name":"NlbIdNames","value":"%s/dx,%s/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`, dx, lt)))
	eventually(t, 120*time.Second, "two Multi-NLBs game servers Ready on both lines", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "mnlb")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			pod := &pods[i]
			st := networkStatusOf(pod)
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			gates := map[corev1.PodConditionType]bool{}
			for _, g := range pod.Spec.ReadinessGates {
				gates[g.ConditionType] = true
			}
			var port int32
			for j, line := range []struct{ name, id string }{{"dx", dx}, {"lt", lt}} {
				if !gates[corev1.PodConditionType(alibabacloud.ServiceReadinessGatePrefix+pod.Name+"-"+line.name)] {
					return false, fmt.Errorf("%s: readiness gates %v, want one per line", pod.Name, pod.Spec.ReadinessGates)
				}
				svc, err := cs.CoreV1().Services(ns).Get(ctx, pod.Name+"-"+line.name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if svc.Annotations[alibabacloud.AnnotationLBID] != line.id || len(svc.Spec.Ports) != 1 || (j > 0 && svc.Spec.Ports[0].Port != port) {
					return false, fmt.Errorf("Service %s: load balancer %q ports %v, want %s on the other line's port %d", svc.Name, svc.Annotations[alibabacloud.AnnotationLBID], svc.Spec.Ports, line.id, port)
				}
				port = svc.Spec.Ports[0].Port
				if len(st.ExternalAddresses) != 2 {
					return false, fmt.Errorf("%s: external addresses %+v, want one per line", pod.Name, st.ExternalAddresses)
				}
				a := st.ExternalAddresses[j]
				if a.IP != c.Address(line.id) || a.EndPoint != cloudbox.NLBHostname(line.id)+"/"+line.name || len(a.Ports) != 1 || a.Ports[0].Port == nil || int32(a.Ports[0].Port.IntValue()) != port {
					return false, fmt.Errorf("%s: line %s address %+v, want %s, %s/%s, port %d", pod.Name, line.name, a, c.Address(line.id), cloudbox.NLBHostname(line.id), line.name, port)
				}
			}
		}
		return true, nil
	})
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, dx)
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, lt)
}
