package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// TestDrainingServerClosesConnections: while draining, every webhook answer carries
// "Connection: close" (the server then closes the connection) and readiness fails; before,
// connections are kept alive and readiness passes.
func TestDrainingServerClosesConnections(t *testing.T) {
	draining := &atomic.Bool{}
	srv := drainingServer{Server: webhook.NewServer(webhook.Options{}), draining: draining}
	srv.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ts := httptest.NewServer(srv.WebhookMux())
	defer ts.Close()
	get := func() *http.Response {
		t.Helper()
		resp, err := ts.Client().Post(ts.URL+"/hook", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	if resp := get(); resp.Close || resp.Header.Get("Connection") == "close" {
		t.Errorf("before draining: Connection %q, want keep-alive", resp.Header.Get("Connection"))
	}
	if err := notDraining(draining)(nil); err != nil {
		t.Errorf("readiness before draining: %v", err)
	}
	draining.Store(true)
	if resp := get(); !resp.Close {
		t.Errorf("while draining: the response does not close the connection (Connection %q)", resp.Header.Get("Connection"))
	}
	if err := notDraining(draining)(nil); err == nil {
		t.Error("readiness while draining passes, want it to fail")
	}
}
