package volcengine

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

func eipPod(conf string, annotations ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "gs-0", Annotations: map[string]string{
		networkstatus.AnnotationNetworkType: EIPName}}}
	if conf != "" {
		p.Annotations[networkstatus.AnnotationNetworkConf] = conf
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

// TestEIPAnnotationsAtCreate: OKG's annotations and bytes for valid network-confs: OKG's
// description without parameters, the attributes sorted with billingType and bandwidth as
// numbers, an existing EIP's id alone. A number that is not one is a parameterError naming it
// (OKG: internalError).
func TestEIPAnnotationsAtCreate(t *testing.T) {
	for name, tc := range map[string]struct {
		conf    string
		want    map[string]string
		wantErr string
	}{
		"no parameters": {want: map[string]string{AnnotationEIPAllocate: `{"type": "Elastic"}`,
			AnnotationEIPAttributes: `{"description":"Created by the OKG Volcengine EIP plugin. Do not delete or modify."}`}},
		"attributes": {conf: `[{"name":"name","value":"gs"},{"name":"bandwidth","value":"5"},{"name":"billingType","value":"2"},{"name":"isp","value":"BGP"}]`,
			want: map[string]string{AnnotationEIPAllocate: `{"type": "Elastic"}`, AnnotationEIPAttributes: `{"bandwidth":5,"billingType":2,"isp":"BGP","name":"gs"}`}},
		"an existing EIP": {conf: `[{"name":"vke.volcengine.com/primary-eip-id","value":"eip-123"},{"name":"bandwidth","value":"5"}]`,
			want: map[string]string{AnnotationEIPID: "eip-123"}},
		"bandwidth not a number": {conf: `[{"name":"bandwidth","value":"5M"}]`, wantErr: "bandwidth"},
	} {
		t.Run(name, func(t *testing.T) {
			pod, err := NewEIP(plugin.ResultWriters{}).OnPodAdded(context.Background(), nil, eipPod(tc.conf))
			if tc.wantErr != "" {
				var perr *plugin.Error
				if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != tc.wantErr {
					t.Fatalf("error %v, want a parameterError naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{AnnotationEIPID, AnnotationEIPAllocate, AnnotationEIPAttributes} {
				if pod.Annotations[k] != tc.want[k] {
					t.Errorf("%s = %q, want %q", k, pod.Annotations[k], tc.want[k])
				}
			}
		})
	}
}

// TestEIPStatus: OKG's Waiting status at the first update; Ready from the controller's answer,
// with the ENI's address as the internal one (OKG reads the misspelt key niIp and writes an
// empty one); an empty answer is no answer yet (OKG crashes on it); a malformed one is a
// parameterError naming the annotation.
func TestEIPStatus(t *testing.T) {
	ctx := context.Background()
	p := NewEIP(plugin.ResultWriters{})
	pod, err := p.OnPodUpdated(ctx, nil, eipPod(""))
	if err != nil {
		t.Fatal(err)
	}
	waiting := `{"currentNetworkState":"Waiting","createTime":null,"lastTransitionTime":null}`
	if got := pod.Annotations[networkstatus.AnnotationNetworkStatus]; got != waiting {
		t.Fatalf("first update: status %s, want %s", got, waiting)
	}
	pod.Annotations[AnnotationAllocatedEIPs] = `[]`
	if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil || pod.Annotations[networkstatus.AnnotationNetworkStatus] != waiting {
		t.Fatalf("an empty answer: status %s (%v), want Waiting kept", pod.Annotations[networkstatus.AnnotationNetworkStatus], err)
	}
	pod.Annotations[AnnotationAllocatedEIPs] = `[{"EipId":"eip-1","EipAddress":"203.0.113.7","EniId":"eni-1","EniIp":"10.0.0.5"}]`
	if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	ready := `{"internalAddresses":[{"ip":"10.0.0.5"}],"externalAddresses":[{"ip":"203.0.113.7"}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	if got := pod.Annotations[networkstatus.AnnotationNetworkStatus]; got != ready {
		t.Errorf("answered: status %s, want %s", got, ready)
	}
	pod.Annotations[AnnotationAllocatedEIPs] = `{"EipAddress":"203.0.113.7"}`
	_, err = p.OnPodUpdated(ctx, nil, pod)
	var perr *plugin.Error
	if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != AnnotationAllocatedEIPs {
		t.Errorf("a malformed answer: %v, want a parameterError naming %s", err, AnnotationAllocatedEIPs)
	}
}
