package pod

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// podNameLabel is the label Kubernetes-NodePort adds for its Service's selector.
const podNameLabel = "statefulset.kubernetes.io/pod-name"

// namespaceCache stands in for the manager's cached client: Get returns a copy of one
// Namespace, without the fake client's conversions.
type namespaceCache struct {
	client.Reader
	ns *corev1.Namespace
}

func (c namespaceCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.ns.DeepCopyInto(obj.(*corev1.Namespace))
	return nil
}

// BenchmarkHandle is one pod CREATE through Handle and Response.Complete (which encodes the
// patch as the webhook server sends it), with no policy (built-in defaults), for a game
// server pod of two containers (gameServerPod, about 3 KB of JSON):
//   - plugin=HostPort-like: a Synchronous plugin that sets a host port and writes a Ready
//     network-status, as Kubernetes-HostPort does at CREATE;
//   - plugin=NodePort-like: an Asynchronous plugin that adds the pod-name label and writes a
//     NotReady network-status, so the retry state is written too, as Kubernetes-NodePort at
//     CREATE.
//
// patch=diff is the whole-pod diff (admission.PatchResponseFromRaw), patch=direct the
// operations built from the changed fields. The plugins are fakes, so the figures are the
// handler's own cost; docs/benchmarks.md has them and the command.
func BenchmarkHandle(b *testing.B) {
	ctrl.SetLogger(logr.Discard()) // as in the manager, where the success path logs nothing
	kinds := []struct {
		name  string
		setup func(e *env) *corev1.Pod
	}{
		{"HostPort-like", func(e *env) *corev1.Pod {
			e.sync.ready = true
			e.sync.mutate = func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 8123 }
			return gameServerPod(syncName, `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`)
		}},
		{"NodePort-like", func(e *env) *corev1.Pod {
			e.async.mutate = func(p *corev1.Pod) { p.Labels[podNameLabel] = p.Name }
			pod := gameServerPod(asyncNm, `[{"name":"PortProtocols","value":"7777/UDP"}]`)
			delete(pod.Labels, podNameLabel)
			return pod
		}},
	}
	for _, kind := range kinds {
		for _, diff := range []bool{true, false} {
			name := "plugin=" + kind.name + "/patch=direct"
			if diff {
				name = "plugin=" + kind.name + "/patch=diff"
			}
			b.Run(name, func(b *testing.B) {
				e := newEnv(b)
				e.handler.diffWholePod = diff
				ns := &corev1.Namespace{}
				if err := e.handler.Namespaces.Get(context.Background(), client.ObjectKey{Name: testNS}, ns); err != nil {
					b.Fatal(err)
				}
				e.handler.Namespaces = namespaceCache{ns: ns}
				req := request(b, admissionv1.Create, kind.setup(e), nil, false)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					resp := e.handler.Handle(ctx, req)
					if !resp.Allowed || len(resp.Patches) == 0 {
						b.Fatalf("allowed %v, %d patches", resp.Allowed, len(resp.Patches))
					}
					if err := resp.Complete(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPatch is the patch step alone for the HostPort-like change of BenchmarkHandle
// (host port, network-status, decision annotation, traceparent removed, readiness gate):
// patch=diff is json.Marshal of the mutated pod and admission.PatchResponseFromRaw,
// patch=direct is patchResponse's directPatch.
func BenchmarkPatch(b *testing.B) {
	orig := gameServerPod(syncName, `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`)
	raw, err := json.Marshal(orig)
	if err != nil {
		b.Fatal(err)
	}
	mutated := orig.DeepCopy()
	mutated.Spec.Containers[0].Ports[0].HostPort = 8123
	mutated.Annotations[networkstatus.AnnotationNetworkStatus] = `{"networkType":"Kubernetes-HostPort","currentNetworkState":"Ready"}`
	mutated.Annotations[AnnotationDecision] = "Synchronous by built-in default"
	delete(mutated.Annotations, AnnotationTraceparent)
	addReadinessGate(mutated)
	for _, diff := range []bool{true, false} {
		name := "patch=direct"
		if diff {
			name = "patch=diff"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, _, err := patchResponse(raw, orig, mutated, diff)
				if err != nil || len(resp.Patches) == 0 {
					b.Fatal(err, len(resp.Patches))
				}
			}
		})
	}
}
