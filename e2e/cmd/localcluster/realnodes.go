package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/e2e/realnode"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// echoNamespace holds the echo game servers of the real nodes.
const echoNamespace = "echo-game"

// start starts the real nodes (tainted, so that only the echo game servers land on them)
// and kube-proxy, and creates the echo game servers: a HostPort StatefulSet with two pods
// per real node (UDP and TCP), a NodePort StatefulSet with one pod (UDP), an
// AlibabaCloud-SLB one (TCPUDP) and a HwCloud-ELB one (UDP) behind the cloud in a box, and
// two SLB game servers on echoQuotaLB, whose listener quota holds the second back until it
// is raised. It returns the
// real nodes' names. Errors name the step.
func (r *realNodes) start(ctx context.Context, cp *cluster.ControlPlane, cs kubernetes.Interface) (map[string]bool, error) {
	names := map[string]bool{}
	for i := range r.count {
		n, err := r.harness.StartNode(ctx, cp, i, realnode.NodeOptions{Images: r.images.Archives, SandboxImage: r.images.Pause, Taint: true})
		if err != nil {
			return nil, err
		}
		names[n.Name] = true
		fmt.Printf("Real node %s ready at %s.\n", n.Name, n.IP)
	}
	if err := r.harness.StartKubeProxy(cp); err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: echoNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for _, s := range []struct {
		name, networkType, conf string
		replicas                int
	}{
		{"echo-hostport", "Kubernetes-HostPort", fmt.Sprintf(`[{"name":"ContainerPorts","value":"echo:%d/UDP,%d/TCP"}]`, realnode.EchoPort, realnode.EchoPort), 2 * r.count},
		{"echo-nodeport", "Kubernetes-NodePort", fmt.Sprintf(`[{"name":"PortProtocols","value":"%d/UDP"}]`, realnode.EchoPort), 1},
		{"echo-slb", alibabacloud.SLBName, fmt.Sprintf(`[{"name":"SlbIds","value":"echo-slb"},{"name":"PortProtocols","value":"%d/TCPUDP"}]`, realnode.EchoPort), 1},
		{"echo-elb", hwcloud.ELBName, fmt.Sprintf(`[{"name":"ElbIds","value":"echo-elb"},{"name":"PortProtocols","value":"%d/UDP"}]`, realnode.EchoPort), 1},
		{"echo-slb-quota", alibabacloud.SLBName, fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"%d/UDP"}]`, echoQuotaLB, realnode.EchoPort), 2},
	} {
		if _, err := cs.AppsV1().StatefulSets(echoNamespace).Create(ctx, echoStatefulSet(r.images.Echo, s.name, s.networkType, s.conf, s.replicas), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create the echo game servers %s: %w", s.name, err)
		}
	}
	return names, nil
}

// echoStatefulSet is a StatefulSet (Parallel) of echo game servers with the network type
// and network-conf, on the real nodes only.
func echoStatefulSet(image, name, networkType, conf string, replicas int) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	spec := realnode.EchoPodSpec(image)
	spec.NodeSelector = map[string]string{realnode.RealNodeLabel: "true"}
	spec.Tolerations = []corev1.Toleration{{Key: realnode.RealNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: echoNamespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(replicas)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					networkstatus.AnnotationNetworkType: networkType,
					networkstatus.AnnotationNetworkConf: conf,
				}},
				Spec: spec,
			},
		},
	}
}

// stop deletes the echo game servers and waits up to 30 s until their pods are gone, before
// the kubelets stop: the deletion is graceful (1 s), so a pod leaves the API only once its
// kubelet has stopped its containers and CNI DEL has removed its port mappings.
func (r *realNodes) stop(cs kubernetes.Interface) {
	ctx := context.Background()
	_ = cs.AppsV1().StatefulSets(echoNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = cs.CoreV1().Pods(echoNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(echoNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

// probeTimeout bounds each reachability probe.
const probeTimeout = time.Second

// reachable is the REACHABLE cell of p: "-" for a pod that is not on a real node or whose
// network is not Ready; otherwise, for every port of its network-status's external
// addresses, whether a probe sent there (realnode.Probe, over the port's protocol) gets the
// echo game server's answer naming p: "yes", or "no" with the first failing address and why.
func reachable(p *corev1.Pod, realNodes map[string]bool) string {
	if !realNodes[p.Spec.NodeName] || p.Status.Phase != corev1.PodRunning {
		return "-"
	}
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		return "-"
	}
	probed := 0
	for _, a := range st.ExternalAddresses {
		for _, port := range a.Ports {
			if port.Port == nil {
				continue
			}
			proto := strings.ToLower(string(port.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			target := fmt.Sprintf("%s:%s", a.IP, port.Port.String())
			got, err := realnode.Probe(proto, target, "probe", probeTimeout)
			if err == nil && got != p.Name+": probe" {
				err = fmt.Errorf("answered %q", got)
			}
			if err != nil {
				return fmt.Sprintf("no: %s/%s: %v", target, proto, err)
			}
			probed++
		}
	}
	if probed == 0 {
		return "no: no external port"
	}
	return "yes"
}
