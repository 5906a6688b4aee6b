// Package crds embeds the CustomResourceDefinitions of this directory, which controller-gen
// writes (`make manifests`), for tools that validate objects against them offline (nppctl).
package crds

import _ "embed"

// NetworkPluginPolicy is policy.game.kruise.io_networkpluginpolicies.yaml: the
// NetworkPluginPolicy CRD as `make manifests` generates it and the apiserver serves it.
//
//go:embed policy.game.kruise.io_networkpluginpolicies.yaml
var NetworkPluginPolicy []byte
