package network

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestSetupWithManager registers the controller with a manager that is never started (so no
// API server is needed), with the manager's event recorder, and a second one under another
// name next to it.
func TestSetupWithManager(t *testing.T) {
	skip := true
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(EventReporter), Options{Metrics: m})
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	other := NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(EventReporter), Options{ControllerName: "network-retry-2", Metrics: m})
	if err := other.SetupWithManager(mgr); err != nil {
		t.Errorf("SetupWithManager under another name: %v", err)
	}
}
