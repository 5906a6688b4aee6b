package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/okg-extensions/network-plugin-policy/pkg/apicompat"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// checkAPIServer tells whether the API server can honour the pod webhook's matchConditions.
// incompatible is set when it cannot: a version older than apicompat.MinServerVersion, or
// the MutatingWebhookConfiguration mutatingName stored without the matchConditions of its
// two pod entries (when it exists). err is set when the check itself failed (the version or
// the configuration could not be read): the caller exits and the check runs again at the
// container's restart, instead of a replica that stays not ready for a passing API error.
func checkAPIServer(ctx context.Context, cfg *rest.Config, mutatingName string) (incompatible, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client for the compatibility check: %w", err)
	}
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the API server's version for the compatibility check: %w", err)
	}
	if incompatible := apicompat.CheckVersion(info); incompatible != nil {
		return incompatible, nil
	}
	stored, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MutatingWebhookConfiguration %s for the compatibility check: %w", mutatingName, err)
	}
	return apicompat.CheckMatchConditions(stored, podwebhook.SyncWebhookName, podwebhook.AsyncWebhookName), nil
}

// serveIncompatible serves only the probes on probeAddr until ctx ends: /healthz passes and
// /readyz fails its kubernetes-version check with incompatible (controller-runtime's healthz
// handler). Nothing else runs: no manager, no leader election.
func serveIncompatible(ctx context.Context, probeAddr string, incompatible error) error {
	mux := http.NewServeMux()
	mux.Handle("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}})
	mux.Handle("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{
		"kubernetes-version": func(*http.Request) error { return incompatible },
	}})
	srv := &http.Server{Addr: probeAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the probes: %w", err)
	}
	return nil
}
