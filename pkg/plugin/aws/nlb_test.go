package aws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/aws"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	testARN    = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/game-nlb/50dc6c495c0c9188"
	testConfig = "[aws]\nenable = true\n[aws.nlb]\nmin_port = 30001\nmax_port = 30050\n"
)

// conf is a network-conf of name/value pairs.
func conf(kv ...string) string {
	var out []map[string]string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, map[string]string{"name": kv[i], "value": kv[i+1]})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// nlbTest is a harness for one test: the provider configuration cfg, GameServerSets objects.
func nlbTest(t *testing.T, cfg string, objects ...map[string]any) *nlbHarness {
	t.Helper()
	return newNLBHarness(t, nlbCase{ID: t.Name(), Plugin: aws.NLBName, ProviderTOML: cfg, Objects: objects})
}

// gameServerSet is OKG's GameServerSet name in the default namespace.
func gameServerSet(name string) map[string]any {
	return map[string]any{"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-gss-" + name}}
}

// create admits the CREATE of pod name of GameServerSet gss with the network-conf c and
// stores it; it returns the admission's error.
func (h *nlbHarness) create(name, gss, c string) error {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = "default", name
	pod.Labels = map[string]string{networkstatus.LabelOwnerGSS: gss, "statefulset.kubernetes.io/pod-name": name}
	pod.Annotations = map[string]string{networkstatus.AnnotationNetworkType: aws.NLBName, networkstatus.AnnotationNetworkConf: c}
	pod.Spec.Containers = []corev1.Container{{Name: "game", Image: "game:1"}}
	raw, _ := json.Marshal(pod)
	h.cs.Pods = map[string]json.RawMessage{name: raw}
	out, err := h.p.OnPodAdded(context.Background(), h.c, pod)
	if err != nil && !plugin.IsWarning(err) {
		return err
	}
	out.UID = types.UID("uid-" + name)
	out.Status.PodIP = "10.244.1.7"
	if err := h.c.Create(context.Background(), out.DeepCopy()); err != nil {
		h.t.Fatal(err)
	}
	h.pods[name] = out
	return nil
}

// run is one run of pod name (the network controller's UPDATE) with patch.
func (h *nlbHarness) run(name, patch string) nlbResult {
	var raw json.RawMessage
	if patch != "" {
		raw = json.RawMessage(patch)
	}
	return h.update(name, raw)
}

// state is pod name's network state.
func (h *nlbHarness) state(name string) networkstatus.NetworkState {
	st, err := networkstatus.StatusFromPod(h.pods[name])
	if err != nil || st == nil {
		return ""
	}
	return st.CurrentNetworkState
}

// answerTargetGroups is ACK's elbv2 controller creating every TargetGroup in AWS.
func (h *nlbHarness) answerTargetGroups() {
	for _, u := range h.list(aws.TargetGroupGVK) {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": aws.ConditionResourceSynced, "status": "True"}},
			"ackResourceMetadata": map[string]any{"arn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/" + u.GetName() + "/abc"}}
		if err := h.c.Update(context.Background(), &u); err != nil {
			h.t.Fatal(err)
		}
	}
}

// names lists the objects of the plugin's kinds, "<Kind>/<name>".
func (h *nlbHarness) names() []string {
	var out []string
	for _, gvk := range []struct {
		kind string
		list []unstructured.Unstructured
	}{{"TargetGroup", h.list(aws.TargetGroupGVK)}, {"Listener", h.list(aws.ListenerGVK)}, {"TargetGroupBinding", h.list(aws.TargetGroupBindingGVK)}} {
		for _, u := range gvk.list {
			out = append(out, gvk.kind+"/"+u.GetName())
		}
	}
	return out
}

// bound brings pod name to Ready as the controllers would: TargetGroups synced, a run that
// makes the Listeners and bindings, their answers, a run.
func (h *nlbHarness) bound(name string) {
	h.t.Helper()
	h.answerTargetGroups()
	h.run(name, "")
	h.controllersAnswer()
	if r := h.run(name, ""); h.state(name) != networkstatus.NetworkReady {
		h.t.Fatalf("after every answer: %s, %v; want Ready", h.state(name), r.err)
	}
}

// TestNLBReadyWhenBound: OKG reports Ready as soon as the TargetGroup is made; here the
// network is NotReady until ACK has the target group (its ARN), the Listener is synced and
// the AWS Load Balancer Controller has reconciled the binding, and then Ready with the NLB's
// DNS name and the listener port.
func TestNLBReadyWhenBound(t *testing.T) {
	h := nlbTest(t, testConfig)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "TargetGroup/gs-0-30001"} {
		h.run("gs-0", "")
		if got := strings.Join(h.names(), ","); got != want || h.state("gs-0") != networkstatus.NetworkNotReady {
			t.Fatalf("run %d: objects %q, %s; want %q, NotReady", i, got, h.state("gs-0"), want)
		}
	}
	h.answerTargetGroups()
	h.run("gs-0", "")
	if got := strings.Join(h.names(), ","); got != "TargetGroup/gs-0-30001,Listener/gs-0-30001,TargetGroupBinding/gs-0-30001" || h.state("gs-0") != networkstatus.NetworkNotReady {
		t.Fatalf("with the target group: %q, %s; want its Listener and binding, NotReady until they answer", got, h.state("gs-0"))
	}
	h.controllersAnswer()
	h.run("gs-0", "")
	st, _ := networkstatus.StatusFromPod(h.pods["gs-0"])
	if st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) != 1 ||
		st.ExternalAddresses[0].EndPoint != "game-nlb-50dc6c495c0c9188.elb.us-east-1.amazonaws.com" || st.ExternalAddresses[0].Ports[0].Port.IntVal != 30001 {
		t.Fatalf("bound: %+v", st)
	}
}

// TestNLBDisableEnable: a disabled network loses its bindings (the pod leaves the target
// groups, as in OKG) and keeps its status; enabled again, the bindings are made in the run
// and the network is NotReady until they are reconciled (OKG re-flags the TargetGroup and
// reports Ready at once).
func TestNLBDisableEnable(t *testing.T) {
	h := nlbTest(t, testConfig)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP,7778/TCP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	h.run("gs-0", `{"metadata":{"labels":{"game.kruise.io/network-disabled":"true"}}}`)
	if got := strings.Join(h.names(), ","); strings.Contains(got, "TargetGroupBinding") || h.state("gs-0") != networkstatus.NetworkReady {
		t.Fatalf("disabled: %q, %s; want no binding, the status kept", got, h.state("gs-0"))
	}
	h.run("gs-0", `{"metadata":{"labels":{"game.kruise.io/network-disabled":"false"}}}`)
	if got := strings.Join(h.names(), ","); strings.Count(got, "TargetGroupBinding") != 2 || h.state("gs-0") != networkstatus.NetworkNotReady {
		t.Fatalf("enabled: %q, %s; want both bindings, NotReady until reconciled", got, h.state("gs-0"))
	}
	h.controllersAnswer()
	if h.run("gs-0", ""); h.state("gs-0") != networkstatus.NetworkReady {
		t.Fatalf("reconciled: %s, want Ready", h.state("gs-0"))
	}
}

// TestNLBBadInput: where OKG sends what the API server or AWS refuses (TCPUDP, a lower-case
// protocol), reports no NLB for a missing NlbARNs, skips a health check entry it cannot
// read, or refuses an unparsable network-status, each is a parameterError naming the
// parameter, or (the status) replaced by a NotReady one; a pod whose target group name
// passes AWS's 32 characters is refused naming it, before anything is made.
func TestNLBBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		conf, param string
		pod         string
	}{
		"TCPUDP":                 {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/TCPUDP"), "PortProtocols", "gs-0"},
		"lower-case protocol":    {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/udp"), "PortProtocols", "gs-0"},
		"no NlbARNs":             {conf("PortProtocols", "7777/UDP"), aws.ParamNLBARNs, "gs-0"},
		"health check entry":     {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", aws.ParamNLBHealthCheck, "healthCheckEnabled:true,bad"), aws.ParamNLBHealthCheck, "gs-0"},
		"health check number":    {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", aws.ParamNLBHealthCheck, "healthCheckIntervalSeconds:x"), aws.ParamNLBHealthCheck, "gs-0"},
		"health check key":       {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", aws.ParamNLBHealthCheck, "healthCheckPeriod:10"), aws.ParamNLBHealthCheck, "gs-0"},
		"target group name long": {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP"), "metadata.name", "battle-royale-eu-west-1-gs-12"},
		"target group name dot":  {conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP"), "metadata.name", "gs.0"},
	} {
		t.Run(name, func(t *testing.T) {
			h := nlbTest(t, testConfig)
			if err := h.create(tc.pod, "gs", tc.conf); err != nil {
				t.Fatal(err)
			}
			h.run(tc.pod, "")
			r := h.run(tc.pod, "")
			e := plugin.AsError(r.err)
			if e == nil || e.Type != plugin.ParameterError || e.Param != tc.param {
				t.Fatalf("second run: %v, want a parameterError naming %s", r.err, tc.param)
			}
			if got := h.names(); len(got) != 0 {
				t.Errorf("objects made: %v", got)
			}
		})
	}
	t.Run("unparsable network-status", func(t *testing.T) {
		h := nlbTest(t, testConfig)
		if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
			t.Fatal(err)
		}
		if r := h.run("gs-0", `{"metadata":{"annotations":{"game.kruise.io/network-status":"x"}}}`); r.err != nil || h.state("gs-0") != networkstatus.NetworkNotReady {
			t.Fatalf("%v, %s; want a NotReady status in place of it", r.err, h.state("gs-0"))
		}
	})
}

// TestNLBHealthCheck: NlbHealthCheck's keys and NlbVPCId are the TargetGroup's fields, typed
// as ACK's TargetGroupSpec has them (OKG's recorded values).
func TestNLBHealthCheck(t *testing.T) {
	h := nlbTest(t, testConfig)
	hc := "healthCheckEnabled:true,healthCheckIntervalSeconds:10,healthCheckPath:/ok,healthCheckPort:8080,healthCheckProtocol:HTTP,healthCheckTimeoutSeconds:5,healthyThresholdCount:3,unhealthyThresholdCount:4"
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, aws.ParamNLBVPCID, "vpc-9", "PortProtocols", "8080/TCP", aws.ParamNLBHealthCheck, hc)); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	tgs := h.list(aws.TargetGroupGVK)
	if len(tgs) != 1 {
		t.Fatalf("TargetGroups: %d", len(tgs))
	}
	got, _ := json.Marshal(tgs[0].Object["spec"])
	want := `{"healthCheckEnabled":true,"healthCheckIntervalSeconds":10,"healthCheckPath":"/ok","healthCheckPort":"8080","healthCheckProtocol":"HTTP","healthCheckTimeoutSeconds":5,"healthyThresholdCount":3,"name":"gs-0-30001","port":8080,"protocol":"TCP","tags":[{"key":"managed-by","value":"game.kruise.io"}],"targetType":"ip","unhealthyThresholdCount":4,"vpcID":"vpc-9"}`
	if string(got) != want {
		t.Fatalf("spec\n got: %s\nwant: %s", got, want)
	}
}

// TestNLBConfChange: a network-conf that adds a port gets a listener port and its objects
// (OKG indexes past its one-port allocation and panics); one that changes the VPC, which AWS
// cannot change in place, makes the TargetGroup anew (OKG never writes it), and one that
// drops a port removes that port's objects.
func TestNLBConfChange(t *testing.T) {
	h := nlbTest(t, testConfig)
	one := conf(aws.ParamNLBARNs, testARN, aws.ParamNLBVPCID, "vpc-1", "PortProtocols", "7777/UDP")
	if err := h.create("gs-0", "gs", one); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	set := func(c string) string {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkstatus.AnnotationNetworkConf: c}}})
		return string(b)
	}
	two := conf(aws.ParamNLBARNs, testARN, aws.ParamNLBVPCID, "vpc-1", "PortProtocols", "7777/UDP,7778/TCP")
	h.run("gs-0", set(two)) // the Service gets its second port
	h.run("gs-0", "")       // and its TargetGroup
	if got := strings.Join(h.names(), ","); !strings.Contains(got, "TargetGroup/gs-0-30002") {
		t.Fatalf("a port added: %q, want TargetGroup gs-0-30002", got)
	}
	h.bound("gs-0")
	vpc := conf(aws.ParamNLBARNs, testARN, aws.ParamNLBVPCID, "vpc-2", "PortProtocols", "7777/UDP,7778/TCP")
	h.run("gs-0", set(vpc)) // the Service's config hash
	h.run("gs-0", "")       // the TargetGroups go
	h.run("gs-0", "")       // and are made anew
	for _, tg := range h.list(aws.TargetGroupGVK) {
		if v, _, _ := unstructured.NestedString(tg.Object, "spec", "vpcID"); v != "vpc-2" {
			t.Fatalf("TargetGroup %s in %q, want vpc-2", tg.GetName(), v)
		}
	}
	h.bound("gs-0")
	h.run("gs-0", set(conf(aws.ParamNLBARNs, testARN, aws.ParamNLBVPCID, "vpc-2", "PortProtocols", "7778/TCP")))
	r := h.run("gs-0", "")
	svc := &corev1.Service{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "gs-0"}, svc); err != nil || len(svc.Spec.Ports) != 1 {
		t.Fatalf("a port dropped: Service %v, %v", svc.Spec.Ports, err)
	}
	kept := fmt.Sprintf("gs-0-%d", svc.Spec.Ports[0].Port)
	for _, n := range h.names() {
		if !strings.HasSuffix(n, "/"+kept) {
			t.Fatalf("a port dropped: %v still has %s (%v)", h.names(), n, r.err)
		}
	}
	h.run("gs-0", "") // the TargetGroup of the new protocol, made anew
	h.bound("gs-0")
}

// TestNLBFixedReleaseIsExact: a Fixed game server's listener port is freed when its Service is
// gone (with its GameServerSet), and only its own: OKG frees the ports of every key
// containing "<namespace>/<GameServerSet>", another GameServerSet's (gsx) too, and hands
// them out again while they are used.
func TestNLBFixedReleaseIsExact(t *testing.T) {
	h := nlbTest(t, testConfig, gameServerSet("gs"), gameServerSet("gsx"))
	fixed := conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", "Fixed", "true")
	for _, p := range [][2]string{{"gs-0", "gs"}, {"gsx-0", "gsx"}} {
		if err := h.create(p[0], p[1], fixed); err != nil {
			t.Fatal(err)
		}
		h.run(p[0], "")
		h.run(p[0], "")
	}
	gss := &unstructured.Unstructured{Object: gameServerSet("gs")}
	if err := h.c.Delete(context.Background(), gss); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(context.Background(), h.pods["gs-0"]); err != nil {
		t.Fatal(err)
	}
	delete(h.pods, "gs-0")
	h.gc()
	if err := h.create("gs-1", "gsy", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-1", "")
	h.run("gs-1", "")
	svc := &corev1.Service{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "gs-1"}, svc); err != nil {
		t.Fatal(err)
	}
	if got := svc.Spec.Ports[0].Port; got != 30001 {
		t.Fatalf("gs-1 got %d, want 30001 (gs-0's, freed with its Service; gsx-0 keeps 30002)", got)
	}
}

// TestNLBTargetGroupFailure: ACK's word on a target group it could not create (a True
// ACK.Terminal or ACK.Recoverable, as ACK's runtime writes them) is the run's cloudError with
// its message (OKG's watcher skips it, or panics without a message); AWS's TooMany* refusals
// are QuotaExceeded; a False ACK.ResourceSynced, which ACK writes at every reconcile with work
// to do ("Resource not synced"), is waited on.
func TestNLBTargetGroupFailure(t *testing.T) {
	for name, tc := range map[string]struct {
		cond   map[string]any
		reason plugin.Reason
	}{
		"refused":         {map[string]any{"type": aws.ConditionTerminal, "status": "True", "message": "InvalidConfigurationRequest: VPC vpc-1 not found"}, plugin.ReasonCloudRefused},
		"quota":           {map[string]any{"type": aws.ConditionRecoverable, "status": "True", "message": "TooManyTargetGroups: the maximum number of target groups has been reached"}, plugin.ReasonQuotaExceeded},
		"throttled":       {map[string]any{"type": aws.ConditionRecoverable, "status": "True", "reason": "Throttling", "message": "Rate exceeded"}, plugin.ReasonCloudRefused},
		"not synced":      {map[string]any{"type": aws.ConditionResourceSynced, "status": "False", "message": "Resource not synced", "reason": "resource is in sync"}, ""},
		"terminal silent": {map[string]any{"type": aws.ConditionTerminal, "status": "True"}, plugin.ReasonCloudRefused},
	} {
		t.Run(name, func(t *testing.T) {
			h := nlbTest(t, testConfig)
			if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
				t.Fatal(err)
			}
			h.run("gs-0", "")
			h.run("gs-0", "")
			for _, u := range h.list(aws.TargetGroupGVK) {
				u.Object["status"] = map[string]any{"conditions": []any{tc.cond}}
				if err := h.c.Update(context.Background(), &u); err != nil {
					t.Fatal(err)
				}
			}
			r := h.run("gs-0", "")
			if h.state("gs-0") != networkstatus.NetworkNotReady {
				t.Fatalf("state %s, want NotReady", h.state("gs-0"))
			}
			if tc.reason == "" {
				if r.err != nil {
					t.Fatalf("%v, want nothing: waiting", r.err)
				}
				return
			}
			e := plugin.AsError(r.err)
			if e == nil || e.Type != plugin.CloudError || e.Reason != tc.reason {
				t.Fatalf("%v, want a cloudError with reason %s", r.err, tc.reason)
			}
			if msg, _ := tc.cond["message"].(string); !strings.Contains(e.Message, msg) || (msg == "" && !strings.Contains(e.Message, "no message")) {
				t.Errorf("message %q does not carry the controller's %q", e.Message, msg)
			}
		})
	}
}

// TestNLBReadyKeptWhileACKReconciles: once bound, a Ready network stays Ready whatever ACK's
// conditions say next (a False ACK.ResourceSynced while it reconciles a change, a True
// ACK.Recoverable on a throttled call): the target group and the listener exist in AWS as
// long as they have their ARN.
func TestNLBReadyKeptWhileACKReconciles(t *testing.T) {
	h := nlbTest(t, testConfig)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK} {
		for _, u := range h.list(gvk) {
			_ = unstructured.SetNestedSlice(u.Object, []any{
				map[string]any{"type": aws.ConditionResourceSynced, "status": "False", "message": "Resource not synced"},
				map[string]any{"type": aws.ConditionRecoverable, "status": "True", "reason": "Throttling", "message": "Rate exceeded"},
			}, "status", "conditions")
			if err := h.c.Update(context.Background(), &u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := h.run("gs-0", ""); h.state("gs-0") != networkstatus.NetworkReady || r.err != nil {
		t.Fatalf("after ACK's conditions flipped: %s, %v; want Ready kept", h.state("gs-0"), r.err)
	}
}

// TestNLBNotOurs: a TargetGroup of the pod's port name that this manager did not write (no
// managed-by label, another owner) is refused by name, never adopted or changed; an earlier
// pod's of the same name is waited for.
func TestNLBNotOurs(t *testing.T) {
	foreign := map[string]any{"apiVersion": aws.TargetGroupGVK.GroupVersion().String(), "kind": "TargetGroup",
		"metadata": map[string]any{"name": "gs-0-30001", "namespace": "default"}, "spec": map[string]any{"name": "theirs"}}
	h := nlbTest(t, testConfig, foreign)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	r := h.run("gs-0", "")
	if e := plugin.AsError(r.err); e == nil || e.Type != plugin.ParameterError || !strings.Contains(e.Message, "TargetGroup default/gs-0-30001 exists and is not managed") {
		t.Fatalf("%v, want a parameterError naming the TargetGroup", r.err)
	}
	tg := h.list(aws.TargetGroupGVK)[0]
	if v, _, _ := unstructured.NestedString(tg.Object, "spec", "name"); v != "theirs" {
		t.Fatalf("the foreign TargetGroup was changed: %v", tg.Object["spec"])
	}
}

// TestDNSName: the NLB's DNS name from its ARN, and none from anything else.
func TestDNSName(t *testing.T) {
	for arn, want := range map[string]string{
		testARN: "game-nlb-50dc6c495c0c9188.elb.us-east-1.amazonaws.com",
		"arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/app/web/1": "",
		"nlb-1": "",
	} {
		if got := aws.DNSName(arn); got != want {
			t.Errorf("DNSName(%q) = %q, want %q", arn, got, want)
		}
	}
}

// TestNLBControllersFieldsAreNotWrittenBack: ACK writes what AWS returns into the spec (a
// listener action's forwardConfig, tags AWS or someone else added, enums in AWS's case);
// the plugin compares only what it asks for, so a bound game server's objects are not
// written again (a patch loop against the controller) and the network stays Ready.
func TestNLBControllersFieldsAreNotWrittenBack(t *testing.T) {
	h := nlbTest(t, testConfig)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", aws.ParamNLBHealthCheck, "healthCheckProtocol:tcp")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	versions := map[string]string{}
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK} {
		for _, u := range h.list(gvk) {
			spec := u.Object["spec"].(map[string]any)
			spec["tags"] = append(spec["tags"].([]any), map[string]any{"key": "team", "value": "platform"})
			switch gvk {
			case aws.TargetGroupGVK:
				spec["healthCheckProtocol"] = "TCP"
				spec["ipAddressType"] = "ipv4"
			case aws.ListenerGVK:
				action := spec["defaultActions"].([]any)[0].(map[string]any)
				action["forwardConfig"] = map[string]any{"targetGroups": []any{map[string]any{"targetGroupARN": action["targetGroupARN"], "weight": int64(1)}}}
			}
			if err := h.c.Update(context.Background(), &u); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK} {
		for _, u := range h.list(gvk) {
			versions[u.GetKind()+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	if r := h.run("gs-0", ""); h.state("gs-0") != networkstatus.NetworkReady || r.err != nil {
		t.Fatalf("%s, %v; want Ready", h.state("gs-0"), r.err)
	}
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK} {
		for _, u := range h.list(gvk) {
			if versions[u.GetKind()+"/"+u.GetName()] != u.GetResourceVersion() {
				t.Errorf("%s %s written again: %v", u.GetKind(), u.GetName(), u.Object["spec"])
			}
		}
	}
}

// TestNLBFixedNewPodIsBoundAnew: a Fixed game server's binding belongs to its GameServerSet
// and outlives the pod; for the pod made anew (same name, new UID) it is made anew, so that
// the network is Ready only once the AWS Load Balancer Controller has reconciled a binding
// made for this pod, and the objects stay the GameServerSet's.
func TestNLBFixedNewPodIsBoundAnew(t *testing.T) {
	h := nlbTest(t, testConfig, gameServerSet("gs"))
	fixed := conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", "Fixed", "true")
	if err := h.create("gs-0", "gs", fixed); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	old := h.list(aws.TargetGroupBindingGVK)[0]
	if err := h.c.Delete(context.Background(), h.pods["gs-0"]); err != nil {
		t.Fatal(err)
	}
	delete(h.pods, "gs-0")
	if err := h.create("gs-0", "gs", fixed); err != nil {
		t.Fatal(err)
	}
	pod := h.pods["gs-0"]
	pod.UID = "uid-gs-0-2"
	pod.CreationTimestamp = metav1.NewTime(old.GetCreationTimestamp().Add(time.Hour))
	h.run("gs-0", "")
	h.run("gs-0", "")
	if got := h.list(aws.TargetGroupBindingGVK); len(got) != 0 || h.state("gs-0") == networkstatus.NetworkReady {
		t.Fatalf("the earlier pod's binding: %d left, %s; want it gone, NotReady", len(got), h.state("gs-0"))
	}
	h.run("gs-0", "")
	for _, u := range h.list(aws.TargetGroupBindingGVK) {
		// The API server stamps the new binding after the pod (the fake client does not).
		u.SetCreationTimestamp(metav1.NewTime(pod.CreationTimestamp.Add(time.Second)))
		if err := h.c.Update(context.Background(), &u); err != nil {
			t.Fatal(err)
		}
	}
	h.controllersAnswer()
	if h.run("gs-0", ""); h.state("gs-0") != networkstatus.NetworkReady {
		t.Fatalf("bound anew: %s, want Ready", h.state("gs-0"))
	}
	for _, u := range h.list(aws.TargetGroupBindingGVK) {
		if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "GameServerSet" {
			t.Errorf("binding owners %v, want the GameServerSet", refs)
		}
	}
}

// TestNLBDuplicateListenerMadeAnew: AWS refuses a listener on a port whose last holder's
// listener ACK is still deleting (DuplicateListener, terminal in ACK): the Listener is made
// anew at a later run, not left refused for good.
func TestNLBDuplicateListenerMadeAnew(t *testing.T) {
	h := nlbTest(t, testConfig)
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.answerTargetGroups()
	h.run("gs-0", "")
	for _, u := range h.list(aws.ListenerGVK) {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": aws.ConditionTerminal, "status": "True",
			"message": "DuplicateListener: A listener already exists on this port for this load balancer"}}}
		if err := h.c.Update(context.Background(), &u); err != nil {
			t.Fatal(err)
		}
	}
	r := h.run("gs-0", "")
	if e := plugin.AsError(r.err); e == nil || e.Type != plugin.CloudError || len(h.list(aws.ListenerGVK)) != 0 {
		t.Fatalf("%v, %d Listeners; want the cloudError and the Listener gone", r.err, len(h.list(aws.ListenerGVK)))
	}
	h.run("gs-0", "")
	h.controllersAnswer()
	if h.run("gs-0", ""); h.state("gs-0") != networkstatus.NetworkReady {
		t.Fatalf("made anew: %s, want Ready", h.state("gs-0"))
	}
}

// TestNLBFixedTurnedOn: a game server whose network-conf turns Fixed on has its objects
// handed to its GameServerSet (the owners follow the Service's), not refused as someone
// else's.
func TestNLBFixedTurnedOn(t *testing.T) {
	h := nlbTest(t, testConfig, gameServerSet("gs"))
	if err := h.create("gs-0", "gs", conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP")); err != nil {
		t.Fatal(err)
	}
	h.run("gs-0", "")
	h.run("gs-0", "")
	h.bound("gs-0")
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		networkstatus.AnnotationNetworkConf: conf(aws.ParamNLBARNs, testARN, "PortProtocols", "7777/UDP", "Fixed", "true")}}})
	h.run("gs-0", string(patch))
	for range 3 {
		if r := h.run("gs-0", ""); r.err != nil {
			t.Fatalf("%v", r.err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK, aws.TargetGroupBindingGVK} {
		for _, u := range h.list(gvk) {
			if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "GameServerSet" {
				t.Errorf("%s %s owners %v, want the GameServerSet", u.GetKind(), u.GetName(), refs)
			}
		}
	}
	if h.state("gs-0") != networkstatus.NetworkReady {
		t.Errorf("%s, want Ready", h.state("gs-0"))
	}
}
