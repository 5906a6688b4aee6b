package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// serviceAccountNamespaceFile holds the namespace of a pod's service account (mounted by the
// kubelet in every pod that automounts its token).
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// +kubebuilder:rbac:groups=policy.game.kruise.io,resources=networkpluginpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// setupPolicyInformer registers the NetworkPluginPolicy informer with the manager's cache (it
// starts with the manager) and returns a readiness check that passes once the informer has
// synced its initial list.
func setupPolicyInformer(mgr ctrl.Manager) (healthz.Checker, error) {
	informer, err := mgr.GetCache().GetInformer(context.Background(), &policyv1alpha1.NetworkPluginPolicy{})
	if err != nil {
		return nil, fmt.Errorf("get NetworkPluginPolicy informer: %w", err)
	}
	return func(*http.Request) error {
		if !informer.HasSynced() {
			return errors.New("NetworkPluginPolicy informer has not synced")
		}
		return nil
	}, nil
}

// rootNamespace returns flag if set, else $POD_NAMESPACE, else the namespace of the pod's
// service account, and an error naming --root-namespace when none is known (a manager run
// outside a pod must pass the flag).
func rootNamespace(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns, nil
		}
	}
	return "", errors.New("--root-namespace is empty and the manager's own namespace is unknown (no POD_NAMESPACE, no " +
		serviceAccountNamespaceFile + "): pass --root-namespace")
}
