package network

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

func TestHasNetworkType(t *testing.T) {
	with := newPod().obj()
	empty := newPod().annotation(networkstatus.AnnotationNetworkType, "").obj()
	without := newPod().withoutAnnotation(networkstatus.AnnotationNetworkType).obj()
	noAnnotations := newPod().obj()
	noAnnotations.Annotations = nil

	cases := map[string]struct {
		old, pod *corev1.Pod
		want     bool
	}{
		"network-type annotation":                {pod: with, want: true},
		"empty network-type is still reported":   {pod: empty, want: true},
		"other annotations only":                 {pod: without, want: false},
		"no annotations at all":                  {pod: noAnnotations, want: false},
		"update that adds the annotation":        {old: without, pod: with, want: true},
		"update that removes the annotation":     {old: with, pod: without, want: false},
		"update of a pod without the annotation": {old: without, pod: without, want: false},
	}
	p := HasNetworkType()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.old != nil {
				if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.pod}); got != tc.want {
					t.Errorf("Update = %v, want %v", got, tc.want)
				}
				return
			}
			if got := p.Create(event.CreateEvent{Object: tc.pod}); got != tc.want {
				t.Errorf("Create = %v, want %v", got, tc.want)
			}
			if got := p.Delete(event.DeleteEvent{Object: tc.pod}); got != tc.want {
				t.Errorf("Delete = %v, want %v", got, tc.want)
			}
			if got := p.Generic(event.GenericEvent{Object: tc.pod}); got != tc.want {
				t.Errorf("Generic = %v, want %v", got, tc.want)
			}
		})
	}
}
