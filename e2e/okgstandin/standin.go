// Package okgstandin is a stand-in for OpenKruise Game's kruise-game-manager in tests, never
// shipped: OKG's own Go modules are not served to this project's builds, so OKG cannot run
// here. It reproduces these facts of kruise-game-manager (commit d76ace2), and nothing more:
//
//   - At every start it writes both of its webhook configurations, creating them or
//     replacing the whole webhooks list of an existing one with its own (an Update): any
//     entry or matchCondition someone else added is gone (Start, Restart).
//   - MutatingWebhookConfiguration kruise-game-mutating-webhook, entry mgameserverset.kb.io:
//     pods CREATE, UPDATE, DELETE, objectSelector game.kruise.io/owner-gss Exists,
//     failurePolicy Fail, no timeoutSeconds, no matchConditions. With its Kubernetes provider
//     off, OKG has no plugin for the Kubernetes types, so it admits those pods unchanged; the
//     stand-in admits every pod unchanged (it registers no pod plugin).
//   - ValidatingWebhookConfiguration kruise-game-validating-webhook, entry
//     vgameserverset.kb.io: game.kruise.io/v1alpha1 gameserversets CREATE, UPDATE,
//     failurePolicy Fail, no matchConditions. On CREATE with spec.network set, networkType
//     must be non-empty ("network type is required") and one of the registered plugin names
//     ("network type must be one of [...]"); on UPDATE, a non-empty old networkType must not
//     change ("change network type is not allowed"). Nothing else is checked.
//
// Where it differs from OKG, for the tests' sake: it is reached by URL on loopback with a
// certificate of the test cluster's CA, not through the Service
// kruise-game-system/kruise-game-webhook-service.
package okgstandin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// OKG's names (kruise-game-manager d76ace2).
const (
	MutatingConfiguration   = "kruise-game-mutating-webhook"
	ValidatingConfiguration = "kruise-game-validating-webhook"
	PodEntry                = "mgameserverset.kb.io"
	GameServerSetEntry      = "vgameserverset.kb.io"
)

// Manager is a running stand-in: an HTTPS server on loopback and its two configurations.
type Manager struct {
	cs         kubernetes.Interface
	registered []string
	caBundle   []byte
	url        string
	srv        *http.Server
}

// Start serves the stand-in's webhooks on a free loopback port with the certificate
// certPEM/keyPEM (signed by caPEM, for 127.0.0.1) and writes both configurations, as OKG does
// at start. registered are the network types OKG has registered plugins for. Errors: the
// listener, the certificate, or the API server's.
func Start(ctx context.Context, cs kubernetes.Interface, registered []string, caPEM, certPEM, keyPEM []byte) (*Manager, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("okg stand-in certificate: %w", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("okg stand-in listener: %w", err)
	}
	m := &Manager{cs: cs, registered: slices.Clone(registered), caBundle: caPEM, url: "https://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate-v1alpha1-gss", m.serve(m.validateGameServerSet))
	mux.HandleFunc("/mutate-v1-pod", m.serve(func(*admissionv1.AdmissionRequest) *metav1.Status { return nil }))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10e9}
	go func() { _ = m.srv.Serve(ln) }()
	if err := m.Restart(ctx); err != nil {
		_ = m.srv.Close()
		return nil, err
	}
	return m, nil
}

// Restart does what kruise-game-manager does at a start: it writes both configurations,
// replacing their whole webhooks lists. Errors come from the API server.
func (m *Manager) Restart(ctx context.Context) error {
	fail := ptr.To(admissionregistrationv1.Fail)
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MutatingConfiguration},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    PodEntry,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(m.url + "/mutate-v1-pod"), CABundle: m.caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule("", "v1", "pods", admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete)},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "game.kruise.io/owner-gss", Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           fail,
			SideEffects:             none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    GameServerSetEntry,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(m.url + "/validate-v1alpha1-gss"), CABundle: m.caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule("game.kruise.io", "v1alpha1", "gameserversets", admissionregistrationv1.Create, admissionregistrationv1.Update)},
			FailurePolicy:           fail,
			SideEffects:             none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	mc := m.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if cur, err := mc.Get(ctx, mwc.Name, metav1.GetOptions{}); err == nil {
		cur.Webhooks = mwc.Webhooks
		_, err = mc.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("okg stand-in: update %s: %w", mwc.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	} else if _, err := mc.Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("okg stand-in: create %s: %w", mwc.Name, err)
	}
	vc := m.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if cur, err := vc.Get(ctx, vwc.Name, metav1.GetOptions{}); err == nil {
		cur.Webhooks = vwc.Webhooks
		if _, err := vc.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("okg stand-in: update %s: %w", vwc.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	} else if _, err := vc.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("okg stand-in: create %s: %w", vwc.Name, err)
	}
	return nil
}

// Stop deletes both configurations (as uninstalling OKG would) and stops the server.
func (m *Manager) Stop(ctx context.Context) {
	_ = m.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, MutatingConfiguration, metav1.DeleteOptions{})
	_ = m.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ValidatingConfiguration, metav1.DeleteOptions{})
	_ = m.srv.Close()
}

func rule(group, version, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
		APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}}}
}

// serve answers AdmissionReviews with decide's verdict: nil allows, a Status denies.
func (m *Manager) serve(decide func(*admissionv1.AdmissionRequest) *metav1.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &review)
		}
		if err == nil && review.Request == nil {
			err = errors.New("no request")
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if st := decide(review.Request); st != nil {
			resp.Allowed, resp.Result = false, st
		}
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}
}

// gameServerSetNetwork is the part of a GameServerSet OKG's validation reads.
type gameServerSetNetwork struct {
	Spec struct {
		Network *struct {
			NetworkType string `json:"networkType"`
		} `json:"network"`
	} `json:"spec"`
}

func (g gameServerSetNetwork) networkType() string {
	if g.Spec.Network == nil {
		return ""
	}
	return g.Spec.Network.NetworkType
}

// validateGameServerSet is OKG's GameServerSet validation (the package comment).
func (m *Manager) validateGameServerSet(req *admissionv1.AdmissionRequest) *metav1.Status {
	var obj, old gameServerSetNetwork
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return deny(err.Error())
	}
	switch req.Operation {
	case admissionv1.Create:
		if obj.Spec.Network == nil {
			return nil
		}
		if obj.networkType() == "" {
			return deny("network type is required")
		}
		if !slices.Contains(m.registered, obj.networkType()) {
			return deny(fmt.Sprintf("network type must be one of [%s]", strings.Join(m.registered, " ")))
		}
	case admissionv1.Update:
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return deny(err.Error())
		}
		if old.networkType() != "" && old.networkType() != obj.networkType() {
			return deny("change network type is not allowed")
		}
	}
	return nil
}

func deny(msg string) *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Message: msg, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden}
}

// Addr is the stand-in server's address (host:port on loopback).
func (m *Manager) Addr() string { return strings.TrimPrefix(m.url, "https://") }
