package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
)

// setupControllers adds the network retry and readiness controller (leader-elected) to the
// manager.
func setupControllers(mgr ctrl.Manager) error {
	r := network.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(network.EventReporter), network.Options{})
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the network controller: %w", err)
	}
	return nil
}
