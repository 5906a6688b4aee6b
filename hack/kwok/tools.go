//go:build tools

// Package tools pins sigs.k8s.io/kwok, whose cmd/kwok hack/build-controlplane.sh builds
// (fake nodes that run pods for the e2e cluster); the stages it needs are read from the
// same module (kustomize/stage).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
