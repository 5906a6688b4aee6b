package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
)

// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=kruise-game-manager-config,verbs=get

// setupOKGGuard adds the OKG guard (okgguard.Guard) to the manager, on every replica: it
// reads kruise-game-manager's webhook configuration (webhook, from the cache) and provider
// configuration (configMap, by name from the API server) every 10 s, and serves the gauge
// npp_okg_coexistence. Errors come from the metrics registry and the manager.
func setupOKGGuard(mgr ctrl.Manager, recorders *eventrecorder.Provider, webhook string, configMap types.NamespacedName) (*okgguard.Guard, error) {
	m, err := okgguard.NewMetric(metrics.Registry)
	if err != nil {
		return nil, err
	}
	g := &okgguard.Guard{
		Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		WebhookConfiguration: webhook, ConfigMap: configMap,
		Recorder: recorders.Recorder("network-plugin-policy"), Metric: m,
	}
	if err := mgr.Add(g); err != nil {
		return nil, fmt.Errorf("add the OKG guard: %w", err)
	}
	return g, nil
}
