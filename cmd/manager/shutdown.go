package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// drainingContext returns a context that is cancelled shutdownDelay after the first SIGTERM
// or SIGINT, and a flag that turns true at that signal: the replica is draining. A second
// signal exits at once with status 1 (as controller-runtime's SetupSignalHandler does).
//
// Why a delay: the API server keeps HTTP keep-alive connections to a webhook replica, and a
// Service (kube-proxy) never moves an established connection. A replica that closed its
// server at once would race the API server's next request on such a connection, which then
// fails with EOF, and under the sync entry's failurePolicy Fail a HostPort pod create is
// refused. While draining, the webhook answers every request with "Connection: close"
// (drainingServer), so the API server opens new connections, which the Service sends to
// the other replica once this one has left its endpoints (/readyz fails while draining).
func drainingContext(shutdownDelay time.Duration) (context.Context, *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	draining := &atomic.Bool{}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		draining.Store(true)
		ctrl.Log.WithName("shutdown").Info("Draining webhook connections before stopping", "delay", shutdownDelay)
		select {
		case <-time.After(shutdownDelay):
		case <-signals:
			os.Exit(1)
		}
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx, draining
}

// drainingServer is the manager's webhook server with every registered handler wrapped: while
// draining is true, responses carry "Connection: close", so the API server closes the
// connection after the answer instead of reusing it (see drainingContext).
type drainingServer struct {
	webhook.Server
	draining *atomic.Bool
}

// Register registers hook at path, wrapped.
func (s drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// notDraining is the readiness check that fails once the replica drains, so that it leaves
// the webhook Service's endpoints before it stops.
func notDraining(draining *atomic.Bool) func(*http.Request) error {
	return func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down: draining webhook connections")
		}
		return nil
	}
}
