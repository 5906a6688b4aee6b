package pod

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// fuzzEdit changes one of the fields directPatch covers, chosen by b, with key and value
// as map keys, values and condition types.
func fuzzEdit(p *corev1.Pod, b byte, key, value string) {
	arg := int(b / 16)
	k := []string{key, key + "/x", "a~" + key, "x", networkstatus.AnnotationNetworkStatus, AnnotationTraceparent}[arg%6]
	c := &p.Spec.Containers[arg%len(p.Spec.Containers)]
	switch b % 16 {
	case 0, 1:
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = value + strconv.Itoa(arg)
	case 2:
		delete(p.Annotations, k)
	case 3:
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = value
	case 4:
		delete(p.Labels, k)
	case 5:
		if arg%2 == 0 {
			p.Annotations = nil
		} else {
			p.Annotations = map[string]string{}
		}
	case 6:
		if arg%2 == 0 {
			p.Labels = nil
		} else {
			p.Labels = map[string]string{}
		}
	case 7, 8:
		if len(c.Ports) > 0 {
			c.Ports[0].HostPort = int32(8000 + arg)
		} else {
			c.Ports = []corev1.ContainerPort{{Name: key, ContainerPort: int32(arg), HostPort: int32(arg)}}
		}
	case 9:
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: value, ContainerPort: int32(7000 + arg), Protocol: corev1.ProtocolUDP})
	case 10:
		if arg%2 == 0 {
			c.Ports = nil
		} else {
			c.Ports = []corev1.ContainerPort{}
		}
	case 11:
		if len(c.Ports) > 0 {
			c.Ports = c.Ports[1:]
		}
	case 12:
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(k)})
	case 13:
		addReadinessGate(p)
	case 14:
		if arg%2 == 0 {
			p.Spec.ReadinessGates = nil
		} else {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{}
		}
	case 15:
		if len(p.Annotations) > 0 {
			for ak := range p.Annotations {
				p.Annotations[ak] = value
				break
			}
		}
	}
}

// FuzzDirectPatch: for any original pod and any change of its annotations, labels,
// container ports and readiness gates, directPatch covers the change, and its operations,
// applied to the JSON of the original, give exactly the JSON of the mutated pod, the same
// document as admission.PatchResponseFromRaw's whole-pod diff. The first half of edits
// shapes the original, the second half mutates it; key and value are made valid UTF-8, as
// the apiserver's JSON is. Seeds: f.Add and testdata/fuzz/FuzzDirectPatch.
func FuzzDirectPatch(f *testing.F) {
	f.Add("game.kruise.io/network-status", `{"currentNetworkState":"NotReady"}`, []byte{0, 3, 7, 0, 13, 2})
	f.Add("a/b~c", "", []byte{5, 6, 10, 0, 3, 9, 12})
	f.Add("", "\"\\\n", []byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe})
	f.Add("~1", "<&>", []byte{14, 11, 11, 12, 2, 4, 15})
	f.Fuzz(func(t *testing.T, key, value string, edits []byte) {
		key, value = strings.ToValidUTF8(key, ""), strings.ToValidUTF8(value, "")
		orig := gameServerPod("Kubernetes-HostPort", `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`)
		half := len(edits) / 2
		for _, b := range edits[:half] {
			fuzzEdit(orig, b, key, value)
		}
		mutated := orig.DeepCopy()
		for _, b := range edits[half:] {
			fuzzEdit(mutated, b, key, value)
		}
		checkPatch(t, orig, mutated)
	})
}
