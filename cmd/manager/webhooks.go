package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	"github.com/okg-extensions/network-plugin-policy/pkg/policyaudit"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhookcert"
)

// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=webhook-cert,verbs=update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch

// webhookOptions are the flags of the webhook server and its certificates.
type webhookOptions struct {
	port           int
	certDir        string
	certRotation   bool
	serviceName    string
	secretName     string
	mutatingName   string
	validatingName string
	extraDNSNames  []string
	// caOverlap is how long a previous CA stays in the caBundle (--ca-overlap).
	caOverlap time.Duration
	timeout   time.Duration
}

// setupCerts returns a channel that is closed once the webhook server's certificate is in
// certDir and the Secret's CA is known, and the readiness check of the served certificate
// (nil without certRotation). With certRotation, the manager generates and rotates the
// certificate with open-policy-agent/cert-controller (a CA and a serving certificate for
// <serviceName>.<namespace>.svc in the Secret secretName, which the Deployment mounts at
// certDir); webhookcert.BundleReconciler injects the CA into the caBundle of both webhook
// configurations, keeping a previous CA beside a new one for caOverlap, and gate (already in
// the webhook server's tls.Config) serves a certificate of a new CA only once every caBundle
// trusts it. Without it, certDir must already hold tls.crt and tls.key (cert-manager, or
// `make run`), and the channel is closed at once.
func setupCerts(mgr ctrl.Manager, o webhookOptions, namespace string, gate *webhookcert.Gate) (<-chan struct{}, healthz.Checker, error) {
	ready := make(chan struct{})
	if !o.certRotation {
		close(ready)
		return ready, nil, nil
	}
	secret := types.NamespacedName{Namespace: namespace, Name: o.secretName}
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      secret,
		CertDir:        o.certDir,
		CAName:         "network-plugin-policy-ca",
		CAOrganization: "network-plugin-policy",
		DNSName:        fmt.Sprintf("%s.%s.svc", o.serviceName, namespace),
		ExtraDNSNames:  append([]string{fmt.Sprintf("%s.%s.svc.cluster.local", o.serviceName, namespace)}, o.extraDNSNames...),
		IsReady:        ready,
		// No Webhooks: the rotator would write the new CA alone into the caBundle, while
		// replicas still serve certificates of the previous one. BundleReconciler does it
		// with an overlap.
		// Every replica serves webhooks, so every replica needs the certificate.
		RequireLeaderElection: false,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("add certificate rotation: %w", err)
	}
	secrets, err := webhookcert.NewSecretCache(mgr, secret)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(webhookcert.EveryReplica(secrets)); err != nil {
		return nil, nil, fmt.Errorf("add the certificate Secret's cache: %w", err)
	}
	err = (&webhookcert.BundleReconciler{
		Client: mgr.GetClient(), SecretCache: secrets, Secret: secret,
		Mutating: o.mutatingName, Validating: o.validatingName, Overlap: o.caOverlap,
	}).SetupWithManager(mgr)
	if err != nil {
		return nil, nil, err
	}
	gate.CertDir = o.certDir
	gate.Bundles = webhookcert.Trust{Reader: mgr.GetClient(), Mutating: o.mutatingName, Validating: o.validatingName}.Bundles
	if err := mgr.Add(gate); err != nil {
		return nil, nil, fmt.Errorf("add the webhook certificate gate: %w", err)
	}
	if err := metrics.Registry.Register(gate.Collector()); err != nil {
		return nil, nil, fmt.Errorf("register the webhook certificate metric: %w", err)
	}
	return ready, gate.Check, nil
}

// webhookDeps is what the webhooks need; they are registered once all of it is ready.
type webhookDeps struct {
	certsReady   <-chan struct{}
	store        *policy.Store
	pluginsReady *atomic.Bool
	plugins      *plugin.Registry
	// webhookTimeout is the mutating pod webhook's timeoutSeconds (--webhook-timeout).
	webhookTimeout time.Duration
	// minRetryInterval is the platform's floor on retry intervals (--min-retry-interval).
	minRetryInterval time.Duration
	// managerUsername is the manager's own username (ownUsername).
	managerUsername string
	// recorders gives the pod webhook's event recorder.
	recorders *eventrecorder.Provider
	register  []func(mgr ctrl.Manager) error
	// stepBack is the OKG guard's answer (okgguard.Guard.StepBack).
	stepBack func(networkType string) (bool, string)
}

// setupWebhooks registers the mutating pod webhook (and the further webhooks of
// deps.register) with the manager's webhook server once the certificates are in place, the
// policy store has compiled the initial policies and the plugins are initialised: the server
// starts at the first registration, so the apiserver never reaches a webhook that would
// allocate host ports without knowing the existing pods. It returns the readiness check of
// the webhook server.
func setupWebhooks(ctx context.Context, mgr ctrl.Manager, deps webhookDeps) (healthz.Checker, error) {
	m, err := podwebhook.NewMetrics(metrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("register pod webhook metrics: %w", err)
	}
	replica := os.Getenv("POD_NAME")
	if replica == "" {
		if replica, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("the replica's name for status.audit: no POD_NAME and no hostname: %w", err)
		}
	}
	audit, err := policyaudit.New(policyaudit.Options{Client: mgr.GetClient(), Replica: replica, Registerer: metrics.Registry})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(audit); err != nil {
		return nil, fmt.Errorf("add the policy audit recorder: %w", err)
	}
	handler := &podwebhook.Handler{
		Client:     mgr.GetClient(),
		Namespaces: mgr.GetClient(),
		Plugins:    deps.plugins,
		Resolver:   policy.NewResolver(deps.store),
		// One Event object per pod and distinct error in the whole cluster, with a series,
		// not one per retry nor one per replica.
		Recorder:   deps.recorders.Recorder("network-plugin-policy"),
		Metrics:    m,
		Decoder:    admission.NewDecoder(mgr.GetScheme()),
		MaxTimeout: max(deps.webhookTimeout-2*time.Second, deps.webhookTimeout/2),
		// The controller retries on the floored schedule: a run is late only against it.
		MinRetryInterval: deps.minRetryInterval,
		// The network controller's writes of the retry state come with these credentials.
		ManagerUsername: deps.managerUsername,
		StepBack:        deps.stepBack,
		AuditRecorder:   audit,
	}
	registered := &atomic.Bool{}
	log := ctrl.Log.WithName("webhooks")
	go func() {
		select {
		case <-deps.certsReady:
		case <-ctx.Done():
			return
		}
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			return deps.store.HasSynced() && deps.pluginsReady.Load(), nil
		})
		if err != nil {
			return
		}
		srv := mgr.GetWebhookServer()
		srv.Register(podwebhook.Path, &webhook.Admission{Handler: handler})
		srv.Register(podwebhook.StatusPath, &webhook.Admission{Handler: &podwebhook.StatusHandler{
			Decoder: admission.NewDecoder(mgr.GetScheme()), ManagerUsername: deps.managerUsername,
			Plugins: handler.Plugins, StepBack: handler.StepBack,
		}})
		for _, r := range deps.register {
			if err := r(mgr); err != nil {
				log.Error(err, "Cannot register a webhook; the manager stays not ready")
				return
			}
		}
		registered.Store(true)
		log.Info("Webhooks registered")
	}()
	return func(req *http.Request) error {
		select {
		case <-deps.certsReady:
		default:
			return errors.New("webhook certificates are not ready")
		}
		if !registered.Load() {
			return errors.New("webhooks are not registered yet (waiting for the policy store and the plugins)")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}, nil
}
