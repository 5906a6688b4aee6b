package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// serviceAccountNamespaceFile holds the namespace of a pod's service account (mounted by the
// kubelet in every pod that automounts its token).
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// +kubebuilder:rbac:groups=policy.game.kruise.io,resources=networkpluginpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,resourceNames=network-plugin-policy.policy.game.kruise.io,verbs=get;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// setupPolicyStore creates the policy store, feeds it from the manager cache's
// NetworkPluginPolicy informer, and returns it with a readiness check that passes once the
// informer's initial list is compiled.
func setupPolicyStore(ctx context.Context, mgr ctrl.Manager, rootNS string, plugins *plugin.Registry,
	webhookTimeout time.Duration) (*policy.Store, healthz.Checker, error) {
	m, err := policy.NewMetrics(metrics.Registry)
	if err != nil {
		return nil, nil, fmt.Errorf("register policy metrics: %w", err)
	}
	store, err := policy.NewStore(policy.StoreOptions{
		RootNamespace: rootNS,
		Metrics:       m,
		Lint:          policy.LintOptions{Plugins: pluginDescriptors(plugins), WebhookTimeout: webhookTimeout},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create policy store: %w", err)
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &policyv1alpha1.NetworkPluginPolicy{})
	if err != nil {
		return nil, nil, fmt.Errorf("get NetworkPluginPolicy informer: %w", err)
	}
	if err := store.Register(ctrl.LoggerInto(ctx, ctrl.Log.WithName("policy-store")), informer); err != nil {
		return nil, nil, fmt.Errorf("register policy store with the informer: %w", err)
	}
	return store, func(*http.Request) error {
		if !store.HasSynced() {
			return errors.New("policy store has not compiled the initial NetworkPluginPolicy list")
		}
		return nil
	}, nil
}

// managerNamespace returns the namespace the manager runs in: $POD_NAMESPACE (set by the
// Deployment of config/manager), else the namespace of the pod's service account, else
// rootFlag (--root-namespace, for a manager run outside a pod without POD_NAMESPACE). It holds
// the webhook certificate Secret and the leader-election Lease, and is the default root
// namespace. The error names POD_NAMESPACE and --root-namespace when none is known.
func managerNamespace(rootFlag string) (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns, nil
		}
	}
	if rootFlag != "" {
		return rootFlag, nil
	}
	return "", errors.New("the manager's own namespace is unknown (no POD_NAMESPACE, no " +
		serviceAccountNamespaceFile + ") and --root-namespace is empty: set POD_NAMESPACE")
}
