package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the API group of every kind in this package.
const GroupName = "policy.game.kruise.io"

var (
	// GroupVersion is the group and version of this package: policy.game.kruise.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name that code-generator's clientset and
	// listers expect.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the group-qualified GroupResource for an unqualified resource name, such
// as "networkpluginpolicies"; code-generator's listers use it to build NotFound errors.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
