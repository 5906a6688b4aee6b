package cluster

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallCRDs creates (or updates) the CustomResourceDefinitions in the YAML files of dirs,
// such as the repository's crds/, and waits until the apiserver serves them.
func InstallCRDs(cfg *rest.Config, dirs ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true})
	if err != nil {
		return nil, fmt.Errorf("install CRDs from %v: %w", dirs, err)
	}
	return crds, nil
}
