package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "policy.game.kruise.io"

var (
	// GroupVersion is the group and version of this package: policy.game.kruise.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name that code-generator's clientset and
	// listers expect.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this package's kinds with a runtime.Scheme (apimachinery's
	// builder, as Kubernetes' own API packages use, so that importing the API pulls in no
	// controller-runtime).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers NetworkPluginPolicy and NetworkPluginPolicyList, and the meta/v1
// types of the group version (list and get options, watch events).
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &NetworkPluginPolicy{}, &NetworkPluginPolicyList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Resource returns the group-qualified GroupResource for an unqualified resource name, such
// as "networkpluginpolicies"; code-generator's listers use it to build NotFound errors.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
