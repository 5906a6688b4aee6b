package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// slbRange is [alibabacloud.slb] of the load-balancer phases: 200 listener ports per SLB,
// the most OKG's rule allows ((max_port - min_port) - len(block_ports) at most 199; max_port
// included), so 1,000 servers need at least 5 SLBs.
const (
	slbMinPort = 500
	slbMaxPort = 699
)

// providerConfig is the manager's provider configuration when a load-balancer or EIP phase
// runs: OKG's Kubernetes defaults, [alibabacloud.slb] with slbRange and, with an EIP phase,
// [volcengine] (eipProviderConfig).
var providerConfig = fmt.Sprintf(`[kubernetes]
enable = true
[kubernetes.hostPort]
min_port = 8000
max_port = 9000

[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = %d
max_port = %d
`, slbMinPort, slbMaxPort)

// eipProviderConfig enables Volcengine-EIP, whose results the box's EIP controller writes as
// a kube-system ServiceAccount (the default result writers).
const eipProviderConfig = `
[volcengine]
enable = true
`

// observeAnswer records, for an EIP phase, the first time pod had its controller's answer
// (volcengine.AnnotationAllocatedEIPs), by the pod's name: the EIP phases' "ingress".
func (l *lbTimes) observeAnswer(pod *corev1.Pod, now time.Time) {
	if pod.Annotations[volcengine.AnnotationAllocatedEIPs] == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.ingress[pod.Name]; !seen {
		l.ingress[pod.Name] = now
	}
}

// sharedConf is the network-conf of the sharedport phases: enough SLB ids fleet-sp-0 … for
// pods game servers at 200 each (alibabacloud's slbMaxBackends), and one UDP port.
func sharedConf(pods int) string {
	ids := make([]string, (pods+199)/200)
	for i := range ids {
		ids[i] = fmt.Sprintf("fleet-sp-%d", i)
	}
	return fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, strings.Join(ids, ","))
}

// slbConf is the network-conf of the slb phases: n SLB ids fleet-slb-0 … and one UDP port.
func slbConf(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("fleet-slb-%d", i)
	}
	return fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, strings.Join(ids, ","))
}

// okgInterval and okgWindow are OKG's re-drive of a pod's plugin: about every
// NETWORK_PROBE_INTERVAL_TIME (5 s) while the GameServer's network has been waiting less than
// NETWORK_TOTAL_WAIT_TIME (60 s), then never again on its own.
const (
	okgInterval = 5 * time.Second
	okgWindow   = 60 * time.Second
)

// okgReady is when OKG's rule would see the network Ready, from the pod's CREATE, for a
// Service whose ingress came after ingress: the first 5 s re-drive at or after it, if that is
// within the 60 s; false when none is (the pod stays NotReady until something else updates
// it). The re-drives are taken at 5 s, 10 s, … from the CREATE, which the first plugin run
// (at admission, before any address) stands for.
func okgReady(ingress time.Duration) (time.Duration, bool) {
	k := (ingress + okgInterval - 1) / okgInterval
	if k < 1 {
		k = 1
	}
	at := k * okgInterval
	return at, at <= okgWindow
}

// lbTimes are the first time each Service of a load-balancer phase had an ingress address,
// by name (a game server's Service has its pod's name), as this process saw it.
type lbTimes struct {
	mu      sync.Mutex
	ingress map[string]time.Time
}

// observe records svc's first ingress at now.
func (l *lbTimes) observe(svc *corev1.Service, now time.Time) {
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ingress[svc.Name]; !ok {
		l.ingress[svc.Name] = now
	}
}

// lbResult is what a load-balancer phase adds to its phaseResult (its service-controller
// workers are in the phase's name).
type lbResult struct {
	// latency is the box's cloud's delay per call.
	latency time.Duration
	// ingress: CREATE to the Service's ingress; readyAfterIngress: network Ready minus
	// ingress, per pod that has both.
	ingress, readyAfterIngress stats
	// okg is OKG's rule (okgReady) on the same ingress times; the pods it leaves NotReady
	// are the phase's pods less okg.n.
	okg stats
}

// measureLB returns the load-balancer figures of a phase from its pods' and Services' times.
// In a shared-Service phase (shared) a pod's Service is the one its SLB label names, and its
// ingress the later of that Service's first ingress and the pod's CREATE: a pod created
// after its SLB had an address has it from the start.
func measureLB(tr *tracker, l *lbTimes, shared bool) (ingress, readyAfter, okg []time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, p := range tr.pods {
		key := name
		if shared {
			key = p.lb
		}
		at, ok := l.ingress[key]
		if !ok {
			continue
		}
		if at.Before(p.created) {
			at = p.created
		}
		in := at.Sub(p.created)
		ingress = append(ingress, in)
		if !p.ready.IsZero() {
			readyAfter = append(readyAfter, p.ready.Sub(at))
		}
		if d, ok := okgReady(in); ok {
			okg = append(okg, d)
		}
	}
	return ingress, readyAfter, okg
}

// logCloudTo sends klog (the service controller's log) to the file path, errors included.
func logCloudTo(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			return err
		}
	}
	klog.SetOutput(f)
	return nil
}
