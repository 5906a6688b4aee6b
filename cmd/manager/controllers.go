package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/policystatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// setupControllers adds the leader-elected controllers to the manager: network retry and
// readiness for pods, and the status (Ready condition, observedGeneration, warnings) of
// NetworkPluginPolicies from the store's compile results.
func setupControllers(mgr ctrl.Manager, store *policy.Store) error {
	r := network.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(network.EventReporter), network.Options{})
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the network controller: %w", err)
	}
	if err := (&policystatus.Reconciler{Client: mgr.GetClient(), Results: store}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the policy status controller: %w", err)
	}
	return nil
}
