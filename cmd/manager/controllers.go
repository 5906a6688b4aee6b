package main

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/policystatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/webhookconfig"
	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// setupControllers adds the leader-elected controllers to the manager: network retry and
// readiness for pods, catch-up of pods admitted while no webhook replica answered (once this
// replica's webhooks serve, webhooksReady), the status (Ready condition, observedGeneration,
// warnings) of NetworkPluginPolicies from the store's compile results, and the
// matchConditions of the two pod webhook entries of the MutatingWebhookConfiguration
// mutatingName, from the store's policies. The network and catch-up controllers run
// retry.maxConcurrentReconciles workers each; the network controller raises every retry
// interval to retry.minInterval. Their events are recorded through recorders: one Event
// object per pod and distinct event, with a series (eventrecorder.Provider).
//
// While guard steps back from a provider (kruise-game-manager still runs its plugins), the
// network and catch-up controllers leave the pods of its types alone and the webhook entries
// intercept none of its types as synchronous.
func setupControllers(mgr ctrl.Manager, recorders *eventrecorder.Provider, store *policy.Store, plugins *plugin.Registry, mutatingName string, webhooksReady healthz.Checker,
	retry retryOptions, guard *okgguard.Guard, pluginsReady *atomic.Bool) error {
	recorder := recorders.Recorder(network.EventReporter)
	// Retries that the caches show would fail as the last one are counted without a write;
	// until the plugins have their caches, every retry is a real run.
	precheck := func(ctx context.Context, pod *corev1.Pod) (*networkretry.Error, bool) {
		if !pluginsReady.Load() {
			return nil, false
		}
		return podwebhook.Precheck(ctx, plugins, mgr.GetClient(), pod)
	}
	r := network.NewReconciler(mgr.GetClient(), recorder, network.Options{
		NetworkTypes:            plugins.Names(),
		MaxConcurrentReconciles: retry.maxConcurrentReconciles,
		MinRetryInterval:        retry.minInterval,

		MaxRecreatesPerNamespacePerMinute: retry.maxRecreatesPerMinute,
		StepBack:                          guard.StepBack,
		Looked:                            guard.Looked,
		WatchLoadBalancers:                hasLoadBalancers(plugins),
		SharedServiceLabel:                sharedServiceLabel(plugins),
		WatchResults:                      plugins.ResultObjects(),
		ResultAnnotations:                 plugins.ResultAnnotations(),
		Finalizers:                        plugins.Finalizers(),
		Precheck:                          precheck,
		StateRefresh:                      retry.stateRefresh,
	})
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the network controller: %w", err)
	}
	catchUp := network.NewCatchUpReconciler(mgr.GetClient(), recorder, network.Options{MaxConcurrentReconciles: retry.maxConcurrentReconciles, StepBack: guard.StepBack, Looked: guard.Looked},
		network.CatchUpOptions{NetworkTypes: plugins.Names(), WebhookReady: served(webhooksReady)})
	if err := catchUp.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the network catch-up controller: %w", err)
	}
	if err := (&policystatus.Reconciler{Client: mgr.GetClient(), Results: store}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the policy status controller: %w", err)
	}
	err := (&webhookconfig.Reconciler{Client: mgr.GetClient(), Name: mutatingName, Store: store, Plugins: pluginDescriptors(plugins),
		StepBack: guard.StepBack, StepBackChanged: guard.Changed, Looked: guard.Looked}).SetupWithManager(mgr)
	if err != nil {
		return fmt.Errorf("set up the webhook configuration controller: %w", err)
	}
	return nil
}

// served turns the webhook server's readiness check (which dials the server) into a cheap
// predicate: once the check has passed, it stays true without dialing again.
func served(check healthz.Checker) func() bool {
	var ok atomic.Bool
	return func() bool {
		if ok.Load() {
			return true
		}
		if check(nil) != nil {
			return false
		}
		ok.Store(true)
		return true
	}
}

// hasLoadBalancers reports whether a load-balancer plugin (pkg/plugin/lb or
// pkg/plugin/sharedport) is registered.
func hasLoadBalancers(plugins *plugin.Registry) bool {
	for _, p := range plugins.List() {
		switch p.(type) {
		case *lb.Plugin, *sharedport.Plugin:
			return true
		}
	}
	return false
}

// sharedServiceLabel returns the pod label of the registered shared-port plugins' Services
// (alibabacloud.LabelLBID), "" when none is registered.
func sharedServiceLabel(plugins *plugin.Registry) string {
	for _, p := range plugins.List() {
		if _, ok := p.(*sharedport.Plugin); ok {
			return alibabacloud.LabelLBID
		}
	}
	return ""
}
