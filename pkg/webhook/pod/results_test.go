package pod

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

var (
	// yangtse is the identity of HwCloud's network controller under the default result
	// writers (plugin.DefaultResultWriterGroup).
	yangtse = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:yangtse-agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	// tenant may edit pods of its namespace.
	tenant = authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
)

// eipEnv is newEnv with HwCloud-CCE-EIP registered too, under the default result writers.
func eipEnv(t *testing.T) *env {
	e := newEnv(t)
	reg, err := plugin.NewRegistry(e.sync, e.async, hwcloud.NewCCEEIP(plugin.ResultWriters{}))
	if err != nil {
		t.Fatal(err)
	}
	e.handler.Plugins = reg
	return e
}

// TestResultTakenOnlyFromItsController: an EIP plugin's result annotation
// (yangtse.io/allocated-ipv4-eip) counts only when HwCloud's network controller wrote it. A
// pod created with another server's address in it, or a tenant's later edit, is put back
// with a warning naming the key, and the network stays Waiting; the controller's own write
// makes it Ready; an UPDATE that changes the network type drops a result written under the
// old type.
func TestResultTakenOnlyFromItsController(t *testing.T) {
	const key = hwcloud.AnnotationAllocatedEIP
	e := eipEnv(t)
	waiting := `{"currentNetworkState":"Waiting","createTime":"2026-01-02T03:04:05Z","lastTransitionTime":"2026-01-02T03:04:05Z"}`
	stored := func(ann ...string) *corev1.Pod {
		p := gamePod(hwcloud.CCEEIPName, append([]string{networkstatus.AnnotationNetworkStatus, waiting}, ann...)...)
		p.Status.PodIP = "10.0.0.7"
		return p
	}
	handle := func(op admissionv1.Operation, pod, old *corev1.Pod, user authenticationv1.UserInfo) (*corev1.Pod, admission.Response) {
		t.Helper()
		req := request(t, op, pod, old, false)
		req.UserInfo = user
		resp := e.handler.Handle(context.Background(), req)
		return admitted(t, req, resp), resp
	}
	warned := func(resp admission.Response) bool {
		return slices.ContainsFunc(resp.Warnings, func(w string) bool {
			return strings.HasPrefix(w, "annotations "+key+" are written by the network controller of "+hwcloud.CCEEIPName+" only")
		})
	}
	external := func(p *corev1.Pod) string {
		st, _ := networkstatus.StatusFromPod(p)
		if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) == 0 {
			return ""
		}
		return st.ExternalAddresses[0].IP
	}

	t.Run("created with a forged result", func(t *testing.T) {
		got, resp := handle(admissionv1.Create, gamePod(hwcloud.CCEEIPName, key, "198.51.100.9"), nil, tenant)
		if _, ok := got.Annotations[key]; ok || !warned(resp) {
			t.Errorf("%s = %q, warnings %q: want it dropped with a warning", key, got.Annotations[key], resp.Warnings)
		}
	})
	t.Run("a tenant adds it", func(t *testing.T) {
		got, resp := handle(admissionv1.Update, stored(key, "198.51.100.9"), stored(), tenant)
		if _, ok := got.Annotations[key]; ok || !warned(resp) || external(got) != "" {
			t.Errorf("%s = %q, Ready at %q, warnings %q: want it removed with a warning, not Ready", key, got.Annotations[key], external(got), resp.Warnings)
		}
	})
	t.Run("the controller adds it", func(t *testing.T) {
		got, resp := handle(admissionv1.Update, stored(key, "203.0.113.5"), stored(), yangtse)
		if got.Annotations[key] != "203.0.113.5" || warned(resp) || external(got) != "203.0.113.5" {
			t.Errorf("%s = %q, Ready at %q, warnings %q: want the controller's address, Ready", key, got.Annotations[key], external(got), resp.Warnings)
		}
	})
	t.Run("a tenant changes the controller's", func(t *testing.T) {
		got, resp := handle(admissionv1.Update, stored(key, "198.51.100.9"), stored(key, "203.0.113.5"), tenant)
		if got.Annotations[key] != "203.0.113.5" || !warned(resp) || external(got) != "203.0.113.5" {
			t.Errorf("%s = %q, Ready at %q, warnings %q: want the stored address back", key, got.Annotations[key], external(got), resp.Warnings)
		}
	})
	t.Run("a tenant removes it", func(t *testing.T) {
		got, resp := handle(admissionv1.Update, stored(), stored(key, "203.0.113.5"), tenant)
		if got.Annotations[key] != "203.0.113.5" || !warned(resp) {
			t.Errorf("%s = %q, warnings %q: want the stored address back", key, got.Annotations[key], resp.Warnings)
		}
	})
	t.Run("written under another type", func(t *testing.T) {
		old := stored(key, "198.51.100.9")
		old.Annotations[networkstatus.AnnotationNetworkType] = asyncNm
		got, resp := handle(admissionv1.Update, stored(key, "198.51.100.9"), old, tenant)
		if _, ok := got.Annotations[key]; ok || !warned(resp) {
			t.Errorf("%s = %q, warnings %q: want it dropped with a warning", key, got.Annotations[key], resp.Warnings)
		}
	})
}

// TestResultThroughPodsStatus: the same rule on the pods/status subresource (StatusHandler):
// a tenant's result is put back by a patch touching that key only; the controller's stands;
// a pod whose type is left to kruise-game-manager is not touched; a result written while the
// pod had no network type is dropped when a status write puts the type back (the entry's
// condition sees network-type changes: TestStatusEntrySeesEveryResultAnnotation).
func TestResultThroughPodsStatus(t *testing.T) {
	const key = hwcloud.AnnotationAllocatedEIP
	e := eipEnv(t)
	stepBack := false
	h := &StatusHandler{Decoder: admission.NewDecoder(runtime.NewScheme()), Plugins: e.handler.Plugins,
		StepBack: func(string) (bool, string) { return stepBack, "OKG serves [hwcloud]" }}
	raw := func(ann ...string) runtime.RawExtension {
		b, _ := json.Marshal(gamePod(hwcloud.CCEEIPName, ann...))
		return runtime.RawExtension{Raw: b}
	}
	// untyped is a stored pod without a network type that carries a result: written while no
	// webhook entry looked (a pod without a type is not the manager's).
	untyped := func() runtime.RawExtension {
		p := gamePod(hwcloud.CCEEIPName, key, "198.51.100.9")
		delete(p.Annotations, networkstatus.AnnotationNetworkType)
		b, _ := json.Marshal(p)
		return runtime.RawExtension{Raw: b}
	}
	for _, tc := range []struct {
		name     string
		user     authenticationv1.UserInfo
		stepBack bool
		old      runtime.RawExtension
		want     []string
	}{
		{"a tenant", tenant, false, raw(), []string{"remove /metadata/annotations/yangtse.io~1allocated-ipv4-eip"}},
		{"the controller", yangtse, false, raw(), nil},
		{"a type left to OKG", tenant, true, raw(), nil},
		{"the type put back over a result written without it", tenant, false, untyped(), []string{"remove /metadata/annotations/yangtse.io~1allocated-ipv4-eip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stepBack = tc.stepBack
			res := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, SubResource: "status", Namespace: testNS, Name: "gs-0",
				UserInfo: tc.user, Object: raw(key, "198.51.100.9"), OldObject: tc.old,
			}})
			var got []string
			for _, op := range res.Patches {
				got = append(got, op.Operation+" "+op.Path)
			}
			if !res.Allowed || !slices.Equal(got, tc.want) {
				t.Errorf("allowed %v, patches %q, want %q", res.Allowed, got, tc.want)
			}
		})
	}
}
