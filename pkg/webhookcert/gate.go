package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultSettle is how long a new serving certificate's CA must have been in every caBundle
// before a replica serves it: the API server reads webhook configurations through an
// informer, so it trusts a new caBundle a moment after the write (milliseconds on one API
// server; the margin covers several behind a load balancer).
const DefaultSettle = 3 * time.Second

// pollInterval is how often the Gate looks for a certificate to adopt.
const pollInterval = 250 * time.Millisecond

// Trust reads the caBundles with which the API server verifies the webhook server: those of
// every entry of the named configurations. Empty names are skipped.
type Trust struct {
	// Reader reads the configurations (the manager's cache). Required.
	Reader client.Reader
	// Mutating and Validating name the webhook configurations.
	Mutating, Validating string
}

// Bundles returns the caBundle of every entry of the configurations, in order. A
// configuration that does not exist contributes nothing. Errors are read errors, wrapped.
func (t Trust) Bundles(ctx context.Context) ([][]byte, error) {
	var out [][]byte
	if t.Mutating != "" {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := t.Reader.Get(ctx, types.NamespacedName{Name: t.Mutating}, m); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("get mutating webhook configuration %q: %w", t.Mutating, err)
		}
		for _, w := range m.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	if t.Validating != "" {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := t.Reader.Get(ctx, types.NamespacedName{Name: t.Validating}, v); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("get validating webhook configuration %q: %w", t.Validating, err)
		}
		for _, w := range v.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out, nil
}

// Gate serves the webhook server's certificate (tls.crt and tls.key in CertDir, watched with
// controller-runtime's certwatcher) and adopts a new one only once every caBundle (Bundles)
// has trusted it for Settle. The first certificate is served at once: there is nothing else
// to serve. Until a new certificate is trusted, the previous one is served, which the
// caBundle's overlap (BundleReconciler) still trusts, so a change of CA never makes the API
// server see an unknown authority. Gate is a manager Runnable on every replica; its
// GetCertificate goes into the webhook server's tls.Config and its Check into /readyz.
type Gate struct {
	// CertDir holds tls.crt and tls.key (the webhook server's --cert-dir). Required.
	CertDir string
	// Bundles returns the caBundles the API server uses (Trust.Bundles). Required.
	Bundles func(ctx context.Context) ([][]byte, error)
	// Settle is how long the caBundles must have trusted a new certificate before it is
	// served; zero means DefaultSettle.
	Settle time.Duration

	served       atomic.Pointer[tls.Certificate]
	trustedSince time.Time
	pending      *tls.Certificate
}

// NeedLeaderElection is false: every replica serves webhooks.
func (g *Gate) NeedLeaderElection() bool { return false }

// Start watches CertDir until ctx ends: it waits for the files to exist, then adopts
// certificates as described on Gate. It returns nil when ctx ends. A watcher that cannot be
// made (the files missing, inotify limits) is retried every 250 ms, its error logged once a
// minute; a watcher that stops with an error is made again.
func (g *Gate) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-certificate")
	var cw *certwatcher.CertWatcher
	var stopped chan struct{}
	var lastLogged time.Time
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if cw != nil {
			select {
			case <-stopped:
				cw = nil
			default:
			}
		}
		if cw == nil {
			w, err := certwatcher.New(filepath.Join(g.CertDir, "tls.crt"), filepath.Join(g.CertDir, "tls.key"))
			switch {
			case err != nil && time.Since(lastLogged) > time.Minute:
				log.Info("Webhook certificate not loadable yet; retrying", "certDir", g.CertDir, "error", err.Error())
				lastLogged = time.Now()
			case err == nil:
				cw, stopped = w.WithWatchInterval(time.Second), make(chan struct{})
				go func(cw *certwatcher.CertWatcher, stopped chan struct{}) {
					defer close(stopped)
					if err := cw.Start(ctx); err != nil {
						log.Error(err, "Certificate watcher stopped; making a new one")
					}
				}(cw, stopped)
			}
		}
		if cw != nil {
			latest, _ := cw.GetCertificate(nil)
			g.consider(ctx, latest, time.Now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// consider adopts latest if nothing is served yet, or if every caBundle has trusted it for
// Settle. It is called from Start's goroutine only.
func (g *Gate) consider(ctx context.Context, latest *tls.Certificate, now time.Time) {
	served := g.served.Load()
	if latest == nil || (served != nil && sameCertificate(served, latest)) {
		g.pending = nil
		return
	}
	log := ctrl.LoggerFrom(ctx).WithName("webhook-certificate")
	if served == nil {
		g.served.Store(latest)
		log.Info("Serving the webhook certificate", "notAfter", notAfter(latest))
		return
	}
	if g.pending == nil || !sameCertificate(g.pending, latest) {
		g.pending, g.trustedSince = latest, time.Time{}
		log.Info("New webhook certificate; serving it once every caBundle trusts it")
	}
	if !g.trusted(ctx, latest, now) {
		g.trustedSince = time.Time{}
		return
	}
	if g.trustedSince.IsZero() {
		g.trustedSince = now
	}
	settle := g.Settle
	if settle == 0 {
		settle = DefaultSettle
	}
	if now.Sub(g.trustedSince) >= settle {
		g.served.Store(latest)
		g.pending = nil
		log.Info("Serving the new webhook certificate", "notAfter", notAfter(latest))
	}
}

// trusted reports whether every caBundle verifies cert at now. A read error is not trust.
func (g *Gate) trusted(ctx context.Context, cert *tls.Certificate, now time.Time) bool {
	bundles, err := g.Bundles(ctx)
	if err != nil || len(bundles) == 0 {
		return false
	}
	for _, b := range bundles {
		if !trusts(b, cert.Certificate, now) {
			return false
		}
	}
	return true
}

// GetCertificate returns the certificate being served, for tls.Config.GetCertificate. The
// error says that none is loaded yet.
func (g *Gate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := g.served.Load()
	if c == nil {
		return nil, errors.New("no webhook certificate loaded yet")
	}
	return c, nil
}

// Check is a readiness check: it fails while no certificate is served, or while a caBundle
// does not trust the served one (the API server would refuse this replica). Without any
// webhook configuration (removed in an emergency) there is nothing to be trusted by, and it
// passes.
func (g *Gate) Check(req *http.Request) error {
	c := g.served.Load()
	if c == nil {
		return errors.New("no webhook certificate loaded yet")
	}
	bundles, err := g.Bundles(req.Context())
	if err != nil {
		return fmt.Errorf("read the webhook configurations' caBundles: %w", err)
	}
	if len(bundles) == 0 {
		return nil
	}
	if !g.trusted(req.Context(), c, time.Now()) {
		return errors.New("the webhook configurations' caBundle does not trust the served certificate")
	}
	return nil
}

// sameCertificate reports whether a and b have the same leaf certificate.
func sameCertificate(a, b *tls.Certificate) bool {
	return len(a.Certificate) > 0 && len(b.Certificate) > 0 && bytes.Equal(a.Certificate[0], b.Certificate[0])
}

// notAfter is the leaf's expiry, for logs (zero when it does not parse).
func notAfter(c *tls.Certificate) time.Time {
	if c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// MetricCertificateExpiry is the gauge Gate.Collector exports: the NotAfter of the serving
// certificate this replica serves, in seconds since the Unix epoch.
const MetricCertificateExpiry = "npp_webhook_certificate_expiry_timestamp_seconds"

var certificateExpiryDesc = prometheus.NewDesc(MetricCertificateExpiry,
	"NotAfter of the webhook serving certificate this replica serves (with --cert-rotation), in seconds since the Unix epoch; absent while none is served.",
	nil, nil)

// Collector returns a prometheus.Collector of MetricCertificateExpiry, read from the served
// certificate at each scrape. It exports nothing while no certificate is served or its leaf
// does not parse.
func (g *Gate) Collector() prometheus.Collector { return gateCollector{g} }

type gateCollector struct{ g *Gate }

// Describe implements prometheus.Collector.
func (c gateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certificateExpiryDesc }

// Collect implements prometheus.Collector.
func (c gateCollector) Collect(ch chan<- prometheus.Metric) {
	served := c.g.served.Load()
	if served == nil {
		return
	}
	leaf := served.Leaf
	if leaf == nil && len(served.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(served.Certificate[0])
	}
	if leaf == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(certificateExpiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}
