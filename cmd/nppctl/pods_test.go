package main

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReplicas: a StatefulSet's replica i is named NAME-i with its pod-name and pod-index
// labels; a replica is found by name only below spec.replicas, and only with a plain index.
func TestReplicas(t *testing.T) {
	pod0 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "arena", Name: "lobby-0",
		Labels: map[string]string{appsv1.StatefulSetPodNameLabel: "lobby-0", appsv1.PodIndexLabel: "0", "app": "lobby"}}}
	pods := map[string]podSource{"arena/lobby-0": {pod: pod0, replicas: 3, statefulSet: true}}
	r, ok := findPod(pods, "arena/lobby-2")
	if !ok || r.pod.Name != "lobby-2" || r.pod.Labels[appsv1.StatefulSetPodNameLabel] != "lobby-2" ||
		r.pod.Labels[appsv1.PodIndexLabel] != "2" || r.pod.Labels["app"] != "lobby" {
		t.Fatalf("findPod(arena/lobby-2) = %+v, %v", r.pod, ok)
	}
	if pod0.Labels[appsv1.PodIndexLabel] != "0" {
		t.Error("rendering a replica changed pod 0")
	}
	for _, key := range []string{"arena/lobby-3", "arena/lobby-02", "arena/lobby--1", "arena/lobby-x", "arena/other-1"} {
		if _, ok := findPod(pods, key); ok {
			t.Errorf("findPod(%s) found a pod", key)
		}
	}
}
