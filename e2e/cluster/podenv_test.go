package cluster

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodEnv: the manager's environment as the kubelet sets it from the Deployment: the
// namespace and the memory limit in bytes (GOMEMLIMIT); an unsupported source is an error.
func TestPodEnv(t *testing.T) {
	ctr := corev1.Container{
		Env: []corev1.EnvVar{
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
	}
	env, err := podEnv(ctr, "npp-system", "manager-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POD_NAMESPACE=npp-system", "GOMEMLIMIT=536870912"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %s", want)
		}
	}
	ctr.Resources.Limits = nil
	if _, err := podEnv(ctr, "npp-system", "manager-0"); err == nil {
		t.Error("limits.memory without a memory limit: no error")
	}
	ctr.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
	if _, err := podEnv(ctr, "npp-system", "manager-0"); err == nil {
		t.Error("limits.cpu: no error")
	}
}
