package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/okgvalidation"
	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhook/gameserverset"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhookcert"
)

// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=kruise-game-manager-config,verbs=get

// setupOKGGuard adds the OKG guard (okgguard.Guard) to the manager, on every replica: it
// reads kruise-game-manager's webhook configurations (webhook and validating, from the cache)
// and provider configuration (configMap, by name from the API server) every 10 s, decides for
// each of providers (the ones this manager's configuration enables) whether this manager
// serves its types, counting the pods and GameServerSets of types plugins does not serve,
// and serves the gauge npp_okg_coexistence. Errors come from the metrics registry and the
// manager.
func setupOKGGuard(mgr ctrl.Manager, recorders *eventrecorder.Provider, webhook, validating string, configMap types.NamespacedName,
	plugins *plugin.Registry, providers []string) (*okgguard.Guard, error) {
	m, err := okgguard.NewMetric(metrics.Registry)
	if err != nil {
		return nil, err
	}
	g := &okgguard.Guard{
		Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		WebhookConfiguration: webhook, ValidatingWebhookConfiguration: validating, ConfigMap: configMap,
		Recorder: recorders.Recorder("network-plugin-policy"), Metric: m,
		Providers: providers, Pods: mgr.GetCache(),
		Served: func(networkType string) bool { _, ok := plugins.Get(networkType); return ok },
	}
	if err := mgr.Add(g); err != nil {
		return nil, fmt.Errorf("add the OKG guard: %w", err)
	}
	return g, nil
}

// setupOKGGameServerSetValidation registers the GameServerSet validating webhook
// (gameserverset.Path; with the root policies' network-conf rules of store) and the
// controller that keeps this manager's matchCondition on OKG's
// GameServerSet entry of the ValidatingWebhookConfiguration name, and the matchConditions of
// its own entry in the configuration own, in step (okgvalidation.Reconciler), both on every
// replica; the controller watches OKG's configuration through a cache of its own. Both follow
// guard, per network type: the types of a provider it steps back from are left out of the
// condition and of the own entry (all of them: the condition is removed and the own entry
// matches nothing), so that OKG validates those GameServerSets again; before its first look
// nothing is written.
// Without manage, the condition is removed (one an earlier run left) and the own entry
// matches nothing. Errors come from the cache, the metrics registry and the controller
// builder.
func setupOKGGameServerSetValidation(mgr ctrl.Manager, recorders *eventrecorder.Provider, plugins *plugin.Registry, store *policy.Store, guard *okgguard.Guard, name, own string, manage bool) error {
	mgr.GetWebhookServer().Register(gameserverset.Path, &webhook.Admission{Handler: &gameserverset.Validator{Plugins: plugins, Reader: mgr.GetClient(), StepBack: guard.StepBack,
		Resolver: policy.NewResolver(store), Namespaces: mgr.GetClient()}})
	c, err := okgvalidation.NewCache(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields()}, name)
	if err != nil {
		return err
	}
	if err := mgr.Add(webhookcert.EveryReplica(c)); err != nil {
		return fmt.Errorf("add the cache of %s: %w", name, err)
	}
	m, err := okgvalidation.NewMetrics(metrics.Registry)
	if err != nil {
		return err
	}
	served := plugins.Names()
	r := &okgvalidation.Reconciler{
		Client: mgr.GetClient(), Name: name, Own: own, Manage: manage, Metrics: m,
		Recorder: recorders.Recorder("network-plugin-policy"),
		Served: func() ([]string, bool) {
			if !guard.Looked() {
				return nil, false
			}
			var out []string
			for _, t := range served {
				if back, _ := guard.StepBack(t); !back {
					out = append(out, t)
				}
			}
			return out, true
		},
		Changed: guard.Changed,
	}
	return r.SetupWithManager(mgr, c)
}

// removeOKGCondition removes this manager's condition from OKG's GameServerSet entry of the
// ValidatingWebhookConfiguration name (okgvalidation.RemoveCondition), within 3 minutes, and
// logs what it did. With podsSelector, it first waits until no pod of its namespace
// (POD_NAMESPACE) matches it: a running manager would put the condition back. Errors come from
// the kubeconfig, the selector and the API server.
func removeOKGCondition(name, podsSelector string) error {
	ctx, cancel := context.WithTimeout(ctrl.SetupSignalHandler(), 3*time.Minute)
	defer cancel()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if podsSelector != "" {
		sel, err := labels.Parse(podsSelector)
		if err != nil {
			return fmt.Errorf("--wait-for-pods-gone %q: %w", podsSelector, err)
		}
		ns := os.Getenv("POD_NAMESPACE")
		err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
				ctrl.Log.Info("Cannot list the manager's pods yet", "error", err.Error())
				return false, nil
			}
			return len(pods.Items) == 0, nil
		})
		if err != nil {
			return fmt.Errorf("the manager's pods (%s in %q) are still there: %w", podsSelector, ns, err)
		}
	}
	removed, err := okgvalidation.RemoveCondition(ctx, c, name)
	if err != nil {
		return err
	}
	ctrl.Log.Info("OKG's GameServerSet webhook validates every GameServerSet again", "configuration", name, "conditionRemoved", removed)
	return nil
}
