package cloudnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/aws"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// elb is the box's ACK elbv2 controller and AWS Load Balancer Controller,
// started once for the rest of the run by startELB.
var elb standIn[cloudbox.AWSELB]

// startELB starts the box's AWS controllers against the suite's cluster,
// once, for the rest of the run.
func startELB(t *testing.T) *cloudbox.AWSELB {
	t.Helper()
	return elb.get(t, "the box's AWS controllers", cloudbox.StartAWSELB)
}

// awsPorts is how many listener ports the suite's [aws.nlb] hands out on one NLB.
const awsPorts = 3

// nlbARN is an NLB of the box's AWS; its DNS name is nlbDNS.
const (
	nlbARN = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/game/50dc6c495c0c9188"
	nlbDNS = "game-50dc6c495c0c9188.elb.eu-west-1.amazonaws.com"
)

// TestAWSNLBAsDeployed: AmazonWebServices-NLB game servers, served as deployed, on the box's
// ACK elbv2 controller and AWS Load Balancer Controller, in a namespace whose policy makes
// labelled game servers Synchronous:
//   - with an NLB that has room for two listeners in AWS, two of three game servers are Ready
//     at the NLB's DNS name on distinct listener ports of 30001-30003 once their target
//     groups, listeners and bindings have answered; the third's Listener is refused
//     (TooManyListeners): it waits with the ACK controller's message and reason
//     QuotaExceeded, and is Ready on the remaining port once the quota is raised;
//   - [aws.nlb] has three ports: a fourth, Synchronous, game server is denied at CREATE,
//     naming the NLB and the policy;
//   - while ACK's controller fails, a game server made anew waits with reason CloudRefused and
//     is Ready once it recovers, the others kept Ready;
//   - a rolling restart of the replicas changes no game server's network-status;
//   - network-disabled removes the game server's binding (the pod leaves the target group)
//     and keeps its status; enabled again, it is bound anew and Ready.
func TestAWSNLBAsDeployed(t *testing.T) {
	ctx := context.Background()
	e := startELB(t)
	e.SetMaxListeners(2)
	t.Cleanup(func() { e.SetMaxListeners(0) })
	ns := newNamespace(t, "aws-nlb", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: nlb, namespace: %s}
spec:
  plugins: [%q]
  failureModeExpression: "('mode' in object.metadata.labels && object.metadata.labels['mode'] == 'sync') ? 'Synchronous' : 'Asynchronous'"
  retry: {window: 5m, interval: 2s, maxInterval: 4s}
`, ns, aws.NLBName))
	waitForPolicy(t, ns, "nlb", aws.NLBName)
	const set = "anlb"
	tmpl := lbServer(set, aws.NLBName, aws.ParamNLBARNs, nlbARN)
	createStatefulSet(t, ns, set, awsPorts, tmpl)

	readyAt := func(name string, port int32) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			st, err := networkstatus.StatusFromPod(p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, err
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].EndPoint != nlbDNS || st.ExternalAddresses[0].Ports[0].Port.IntVal != port ||
				len(st.InternalAddresses) != 1 || st.InternalAddresses[0].IP != p.Status.PodIP {
				return false, fmt.Errorf("%s Ready at %+v inside %+v, want %s:%d", name, st.ExternalAddresses, st.InternalAddresses, nlbDNS, port)
			}
			return true, nil
		}
	}
	waitingWith := func(name, reason, message string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			if networkstatus.IsReady(p) {
				return false, fmt.Errorf("%s Ready, want it waiting with %s", name, reason)
			}
			st := retryState(t, p)
			return st != nil && st.LastError != nil && string(st.LastError.Reason) == reason && strings.Contains(st.LastError.Message, message), nil
		}
	}
	// The three are created at once: which two get their listeners first is AWS's (the
	// stand-in's) order; the third waits on the quota.
	ports := map[string]int32{} // game server -> its listener port
	var waiting string
	eventually(t, 90*time.Second, "two game servers Ready on distinct listener ports, the third waiting on the NLB's listener quota (QuotaExceeded)", func(ctx context.Context) (bool, error) {
		clear(ports)
		waiting = ""
		for i := range awsPorts {
			name := fmt.Sprintf("%s-%d", set, i)
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			if st, _ := networkstatus.StatusFromPod(p); st != nil && st.CurrentNetworkState == networkstatus.NetworkReady && len(st.ExternalAddresses) == 1 {
				port := st.ExternalAddresses[0].Ports[0].Port.IntVal
				if ok, err := readyAt(name, port)(ctx); !ok || port < 30001 || port > 30003 {
					return false, err
				}
				ports[name] = port
				continue
			}
			if ok, err := waitingWith(name, "QuotaExceeded", "TooManyListeners")(ctx); ok {
				waiting = name
			} else if err != nil {
				return false, err
			}
		}
		distinct := map[int32]bool{}
		for _, port := range ports {
			distinct[port] = true
		}
		return len(ports) == 2 && len(distinct) == 2 && waiting != "", nil
	})
	e.SetMaxListeners(0)
	eventually(t, time.Minute, waiting+" Ready once the quota is raised", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, waiting, metav1.GetOptions{})
		if err != nil || !networkstatus.IsReady(p) {
			return false, ignoreNotFound(err)
		}
		st, _ := networkstatus.StatusFromPod(p)
		ports[waiting] = st.ExternalAddresses[0].Ports[0].Port.IntVal
		return readyAt(waiting, ports[waiting])(ctx)
	})
	if seen := map[int32]bool{ports[set+"-0"]: true, ports[set+"-1"]: true, ports[set+"-2"]: true}; len(seen) != awsPorts {
		t.Fatalf("listener ports %v, want three distinct ones", ports)
	}

	sync := lbServer("sync", aws.NLBName, aws.ParamNLBARNs, nlbARN)
	sync.Labels["mode"] = "sync"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync-0", Labels: sync.Labels, Annotations: sync.Annotations}, Spec: sync.Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), nlbARN) ||
		!strings.Contains(err.Error(), "denied by policy "+ns+"/nlb@") {
		t.Fatalf("a Synchronous game server with no NLB port left: error %v, want a denial naming %s and the policy", err, nlbARN)
	}

	// A game server made anew while ACK's controller fails: its Service and ports come back,
	// its new target group is refused.
	e.SetFail(true)
	t.Cleanup(func() { e.SetFail(false) })
	if err := cs.CoreV1().Pods(ns).Delete(ctx, set+"-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, set+"-2 waiting while ACK's controller fails (CloudRefused)", waitingWith(set+"-2", "CloudRefused", "refuses every call"))
	e.SetFail(false)
	eventually(t, 90*time.Second, set+"-2 Ready on its port once ACK's controller recovers", readyAt(set+"-2", ports[set+"-2"]))
	for _, name := range []string{set + "-0", set + "-1"} {
		if ok, err := readyAt(name, ports[name])(ctx); !ok {
			t.Errorf("%s after the controller's failure: %v; want it kept Ready", name, err)
		}
	}

	// A rolling restart of the replicas with the game servers live changes none of their
	// network-status, as the replicas come back and once their catch-up has run (10 s).
	before := readyPods(t, ns, set, awsPorts, time.Minute)
	if err := mgr.RollingRestart(ctx); err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	for _, when := range []string{"as the replicas are back", "10 s after the restart"} {
		if when != "as the replicas are back" {
			time.Sleep(10 * time.Second)
		}
		pods, err := listPods(ctx, ns, set)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			if got := pods[i].Annotations[networkstatus.AnnotationNetworkStatus]; got != before[pods[i].Name] {
				t.Errorf("%s's network-status %s:\n%s\nwant it unchanged:\n%s", pods[i].Name, when, got, before[pods[i].Name])
			}
		}
	}

	// network-disabled: the binding goes, the status stays; enabled: bound and Ready again.
	bindings := dynamic.NewForConfigOrDie(cp.Config).Resource(aws.TargetGroupBindingGVK.GroupVersion().WithResource("targetgroupbindings")).Namespace(ns)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, set+"-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, set+"-0's binding gone, its status kept", func(ctx context.Context) (bool, error) {
		_, err := bindings.Get(ctx, fmt.Sprintf("%s-0-%d", set, ports[set+"-0"]), metav1.GetOptions{})
		if err == nil {
			return false, nil
		}
		p, perr := cs.CoreV1().Pods(ns).Get(ctx, set+"-0", metav1.GetOptions{})
		return ignoreNotFound(err) == nil && perr == nil && networkstatus.IsReady(p), perr
	})
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, set+"-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, set+"-0 bound again and Ready", func(ctx context.Context) (bool, error) {
		if _, err := bindings.Get(ctx, fmt.Sprintf("%s-0-%d", set, ports[set+"-0"]), metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		return readyAt(set+"-0", ports[set+"-0"])(ctx)
	})
}

// TestAWSHandedOverWhole: this manager serves OKG's one AWS type, so the provider can be
// handed over whole. While OKG serves [aws] AmazonWebServices-NLB pods are left to it
// (admitted untouched, npp_okg_coexistence says conflict on both replicas); once OKG's is
// off, a game server is bound and Ready through the box's controllers; rollback, OKG's [aws]
// on again, gives the type back to OKG.
func TestAWSHandedOverWhole(t *testing.T) {
	startELB(t)
	ns := newNamespace(t, "aws-handover", nil)
	const other = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/handover/0123456789abcdef"
	tmpl := lbServer("nlb", aws.NLBName, aws.ParamNLBARNs, other)
	rollback := handOver(t, ns, "aws", tmpl)
	createStatefulSet(t, ns, "nlb", 1, tmpl)
	eventually(t, 90*time.Second, "the game server Ready on the NLB", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "nlb-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		st, err := networkstatus.StatusFromPod(p)
		return err == nil && st != nil && st.CurrentNetworkState == networkstatus.NetworkReady &&
			len(st.ExternalAddresses) == 1 && st.ExternalAddresses[0].EndPoint == "handover-0123456789abcdef.elb.eu-west-1.amazonaws.com", err
	})
	rollback()
}

// TestAWSResultWriters: with config/aws/result-writers.yaml applied, a namespace owner whose
// Role lets them write TargetGroupBindings and TargetGroups cannot write their status (which
// would make a pod's network Ready before AWS has registered it), while the box's AWS Load Balancer Controller,
// a kube-system ServiceAccount, and ACK's elbv2 controller, of ack-system, still answer: a new
// AmazonWebServices-NLB game server is Ready.
func TestAWSResultWriters(t *testing.T) {
	ctx := context.Background()
	startELB(t)
	applyAdmissionPolicy(t, "../../config/aws/result-writers.yaml")
	ns := newNamespace(t, "aws-writers", nil)
	gvr := aws.TargetGroupBindingGVK.GroupVersion().WithResource("targetgroupbindings")
	owner := dynamic.NewForConfigOrDie(ownerOf(t, ns, aws.TargetGroupBindingGVK.Group, aws.TargetGroupGVK.Group))
	asOwner := owner.Resource(gvr).Namespace(ns)
	probe := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"targetGroupARN": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/probe/0", "targetType": "ip",
		"serviceRef": map[string]any{"name": "probe", "port": int64(1)}}}}
	probe.SetGroupVersionKind(aws.TargetGroupBindingGVK)
	probe.SetName("probe")
	// The owner's Role takes effect once the API server's RBAC cache has it: a refusal
	// before then is retried.
	eventually(t, 30*time.Second, "the namespace owner's TargetGroupBinding created", func(ctx context.Context) (bool, error) {
		_, err := asOwner.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
	// The policy takes effect once the API server has loaded it: poll until refused.
	eventually(t, 30*time.Second, "the namespace owner's status write refused", func(ctx context.Context) (bool, error) {
		got, err := asOwner.Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got.Object["status"] = map[string]any{"observedGeneration": got.GetGeneration()}
		_, err = asOwner.UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return apierrors.IsForbidden(err), nil
	})
	createStatefulSet(t, ns, "nlb", 1, lbServer("nlb", aws.NLBName, aws.ParamNLBARNs,
		"arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/writers/0123456789abcdef"))
	eventually(t, 90*time.Second, "nlb-0 Ready through the controllers' answers", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "nlb-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return networkstatus.IsReady(p), nil
	})
	// Nor can they rewrite the binding's answer.
	got, err := asOwner.Get(ctx, "nlb-0-30001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Object["status"] = map[string]any{"observedGeneration": int64(99)}
	if _, err := asOwner.UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace owner's status update of a TargetGroupBinding: %v, want Forbidden", err)
	}
	// Nor a TargetGroup's (ACK's side of the policy).
	tgs := owner.Resource(aws.TargetGroupGVK.GroupVersion().WithResource("targetgroups")).Namespace(ns)
	tg, err := tgs.Get(ctx, "nlb-0-30001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.Object["status"] = map[string]any{"ackResourceMetadata": map[string]any{"arn": "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/forged/0"}}
	if _, err := tgs.UpdateStatus(ctx, tg, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace owner's status update of a TargetGroup: %v, want Forbidden", err)
	}
}
