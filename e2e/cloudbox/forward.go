package cloudbox

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ForwardChain is the nat chain in which Forward keeps the box's listeners, jumped to from
// PREROUTING (packets from pods and other namespaces) and OUTPUT (clients in this one).
const ForwardChain = "NPP-CLOUDBOX"

// ServiceProxyNameLabel is the label that keeps kube-proxy away from a Service
// (service.kubernetes.io/service-proxy-name): OKG's SLB and NLB Services carry it ("dummy"),
// because Alibaba's load balancers send straight to the pods.
const ServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// forwardResync is how often Forward rewrites its chain beside the changes it is told of.
const forwardResync = 5 * time.Second

// Forward makes the box's load balancers carry packets, as a cloud's do, for the Services
// kube-proxy does not serve (ServiceProxyNameLabel): in the network namespace of this
// process, one DNAT rule per listener (the Service's load-balancer address, protocol and
// port) to the ready endpoints of the Service's EndpointSlices (the pod IP and target port;
// several are chosen at random, as kube-proxy does). The rules are those of the Services
// the cloud has ensured and not deleted (EnsureLoadBalancerDeleted removes them) that still
// exist, and follow the EndpointSlices: a re-created pod's new IP is in the rule within
// seconds, though the service controller does not call the cloud again when endpoints change.
// The chain is rewritten whole and at once (iptables-restore) at every change and every
// forwardResync, and removed when ctx ends. Services kube-proxy serves (Volcengine's,
// HwCloud's, JdCloud's) are left to it. Needs iptables and the right to change the
// namespace's nat table (root); the caller routes the box's addresses (198.51.100.0/24) to
// the namespace. Errors: the informers' and the first write's.
func (c *Cloud) Forward(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	services := factory.Core().V1().Services()
	endpointSlices := factory.Discovery().V1().EndpointSlices()
	kick := make(chan struct{}, 1)
	notify := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() }}
	for _, inf := range []toolscache.SharedIndexInformer{services.Informer(), endpointSlices.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.changed = notify
	c.mu.Unlock()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	write := func() error {
		return restoreChain(c.forwardRules(services.Lister().List, endpointSlices.Lister().List))
	}
	if err := jumpTo(true); err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	go func() {
		tick := time.NewTicker(forwardResync)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				_ = jumpTo(false)
				_ = iptables("-t", "nat", "-F", ForwardChain)
				_ = iptables("-t", "nat", "-X", ForwardChain)
				return
			case <-kick:
			case <-tick.C:
			}
			if err := write(); err != nil {
				klog.ErrorS(err, "cloudbox: write the listeners' forwarding rules")
			}
		}
	}()
	return nil
}

// forwardRules returns the chain's rules (iptables-restore lines) for the Services the
// cloud has ensured that kube-proxy does not serve, from the listers' Services and
// EndpointSlices, in a stable order.
func (c *Cloud) forwardRules(listServices func(labels.Selector) ([]*corev1.Service, error), listSlices func(labels.Selector) ([]*discoveryv1.EndpointSlice, error)) []string {
	svcs, err := listServices(labels.Everything())
	if err != nil {
		return nil
	}
	eps, err := listSlices(labels.Everything())
	if err != nil {
		return nil
	}
	// Services and their ports in a stable order; each listener's rules stay in the order
	// made (the statistic rules before the last, unconditional one), never sorted.
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var rules []string
	for _, svc := range svcs {
		if _, skipped := svc.Labels[ServiceProxyNameLabel]; !skipped || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		addr, ok := c.ensuredAddress(svc)
		if !ok {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			targets := readyTargets(eps, svc, sp)
			proto := strings.ToLower(string(sp.Protocol))
			for i, target := range targets {
				rule := fmt.Sprintf("-A %s -d %s/32 -p %s -m %s --dport %d", ForwardChain, addr, proto, proto, sp.Port)
				if left := len(targets) - i; left > 1 {
					rule += fmt.Sprintf(" -m statistic --mode random --probability %.5f", 1/float64(left))
				}
				rules = append(rules, rule+fmt.Sprintf(" -m comment --comment %q -j DNAT --to-destination %s", svc.Namespace+"/"+svc.Name+":"+sp.Name, target))
			}
		}
	}
	return rules
}

// readyTargets returns "<ip>:<port>" of svc's ready endpoints for its port sp, from the
// EndpointSlices of svc (label kubernetes.io/service-name) whose port of sp's name and
// protocol has a number.
func readyTargets(eps []*discoveryv1.EndpointSlice, svc *corev1.Service, sp corev1.ServicePort) []string {
	var out []string
	for _, s := range eps {
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if p.Port != nil && p.Name != nil && *p.Name == sp.Name && (p.Protocol == nil || *p.Protocol == sp.Protocol) {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && len(e.Addresses) > 0 {
				out = append(out, fmt.Sprintf("%s:%d", e.Addresses[0], port))
			}
		}
	}
	slices.Sort(out)
	return out
}

// ensuredAddress returns the address of svc's load balancer when the cloud has ensured svc
// (and not deleted it since).
func (c *Cloud) ensuredAddress(svc *corev1.Service) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.id(svc)
	if _, ok := c.listeners[id][svc.Namespace+"/"+svc.Name]; !ok {
		return "", false
	}
	return c.addressLocked(id), true
}

// restoreChain replaces ForwardChain's rules with rules in one iptables-restore
// transaction (the chain is created when missing; other chains are not touched).
func restoreChain(rules []string) error {
	var in bytes.Buffer
	fmt.Fprintf(&in, "*nat\n:%s - [0:0]\n", ForwardChain)
	for _, r := range rules {
		in.WriteString(r + "\n")
	}
	in.WriteString("COMMIT\n")
	cmd := exec.Command("iptables-restore", "--noflush")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, out)
	}
	return nil
}

// jumpTo adds (on) or removes the jumps from PREROUTING and OUTPUT to ForwardChain, each
// once.
func jumpTo(on bool) error {
	if on {
		if err := restoreChain(nil); err != nil {
			return err
		}
	}
	for _, hook := range []string{"PREROUTING", "OUTPUT"} {
		present := iptables("-t", "nat", "-C", hook, "-j", ForwardChain) == nil
		switch {
		case on && !present:
			if err := iptables("-t", "nat", "-I", hook, "1", "-j", ForwardChain); err != nil {
				return err
			}
		case !on && present:
			if err := iptables("-t", "nat", "-D", hook, "-j", ForwardChain); err != nil {
				return err
			}
		}
	}
	return nil
}

// iptables runs iptables with args. Errors carry its output.
func iptables(args ...string) error {
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
