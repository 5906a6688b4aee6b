package webhookcert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// testCA is a CA and its key, valid around t0.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) testCA {
	t.Helper()
	return newCAUntil(t, name, t0.Add(24*time.Hour))
}

func newCAUntil(t *testing.T, name string, notAfter time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: c, key: key}
}

// serving returns a serving certificate signed by ca.
func (ca testCA) serving(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(12 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"webhook.system.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// pemOf is the caBundle of cas, in the canonical order bundleFor writes.
func pemOf(cas ...testCA) []byte {
	var certs []*x509.Certificate
	for _, c := range cas {
		certs = append(certs, c.cert)
	}
	return encodePEM(canonicalOrder(certs))
}

// TestBundleForIsTheSameFromEitherView: two replicas whose Secret caches differ for a moment
// (one sees the new CA as current, the other still the previous one) write the same bytes
// during the overlap, so they do not rewrite each other's caBundle back and forth.
func TestBundleForIsTheSameFromEitherView(t *testing.T) {
	oldCA := newCA(t, "old")
	newerCA := newCAFrom(t, "new", t0)
	held := [][]byte{pemOf(newerCA, oldCA)}
	until := t0.Add(5 * time.Minute)
	fromNew, _ := bundleFor([]*x509.Certificate{newerCA.cert}, held, until, t0, 10*time.Minute)
	fromOld, _ := bundleFor([]*x509.Certificate{oldCA.cert}, held, until, t0, 10*time.Minute)
	if !bytes.Equal(fromNew, fromOld) {
		t.Errorf("caBundles differ by the replica's view:\n%s\n%s", fromNew, fromOld)
	}
	if got := parseCAs(fromNew, t0); len(got) != 2 || !got[0].Equal(newerCA.cert) {
		t.Errorf("caBundle %v, want the newer CA first and both", got)
	}
}

// newCAFrom is a CA valid from notBefore for a day.
func newCAFrom(t *testing.T, name string, notBefore time.Time) testCA {
	t.Helper()
	ca := newCAUntil(t, name, notBefore.Add(24*time.Hour))
	tmpl := *ca.cert
	tmpl.NotBefore = notBefore
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: c, key: ca.key}
}

func TestBundleFor(t *testing.T) {
	oldCA, newCA, olderCA := newCA(t, "old"), newCA(t, "new"), newCA(t, "older")
	expiredCA := newCAUntil(t, "expired", t0.Add(-time.Minute))
	current := []*x509.Certificate{newCA.cert}
	overlap := 10 * time.Minute
	cases := map[string]struct {
		held      [][]byte
		until     time.Time
		now       time.Time
		want      []byte
		wantUntil time.Time
	}{
		"fresh install: empty caBundles get the current CA, no overlap": {
			held: [][]byte{nil, nil}, now: t0, want: pemOf(newCA),
		},
		"a new CA keeps the previous one beside it for the overlap": {
			held: [][]byte{pemOf(oldCA), pemOf(oldCA)}, now: t0,
			want: pemOf(newCA, oldCA), wantUntil: t0.Add(overlap),
		},
		"one entry behind is a new CA too": {
			held: [][]byte{pemOf(newCA, oldCA), pemOf(oldCA)}, until: t0.Add(time.Minute), now: t0,
			want: pemOf(newCA, oldCA), wantUntil: t0.Add(overlap),
		},
		"during the overlap, nothing changes": {
			held: [][]byte{pemOf(newCA, oldCA)}, until: t0.Add(5 * time.Minute), now: t0,
			want: pemOf(newCA, oldCA), wantUntil: t0.Add(5 * time.Minute),
		},
		"after the overlap, the previous CA goes": {
			held: [][]byte{pemOf(newCA, oldCA)}, until: t0.Add(-time.Second), now: t0,
			want: pemOf(newCA),
		},
		"a previous CA without a recorded overlap goes at once": {
			held: [][]byte{pemOf(newCA, oldCA)}, now: t0, want: pemOf(newCA),
		},
		"a second new CA during an overlap keeps both previous ones": {
			held: [][]byte{pemOf(oldCA, olderCA)}, until: t0.Add(time.Minute), now: t0,
			want: pemOf(newCA, oldCA, olderCA), wantUntil: t0.Add(overlap),
		},
		"an expired previous CA is not kept": {
			held: [][]byte{pemOf(expiredCA)}, now: t0,
			want: pemOf(newCA),
		},
		"garbage in a caBundle is dropped": {
			held: [][]byte{[]byte("not PEM"), append(pemOf(oldCA), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"...)}, now: t0,
			want: pemOf(newCA, oldCA), wantUntil: t0.Add(overlap),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, gotUntil := bundleFor(current, tc.held, tc.until, tc.now, overlap)
			if diff := cmp.Diff(string(tc.want), string(got)); diff != "" {
				t.Errorf("caBundle (-want,+got):\n%s", diff)
			}
			if !gotUntil.Equal(tc.wantUntil) {
				t.Errorf("overlap until %v, want %v", gotUntil, tc.wantUntil)
			}
		})
	}
}

// TestGateServesANewCertificateOnlyOnceTrusted walks a CA change: the first certificate is
// served at once; a certificate of a new CA is not served while a caBundle lacks that CA, nor
// before it has trusted it for Settle; then it is.
func TestGateServesANewCertificateOnlyOnceTrusted(t *testing.T) {
	ctx := context.Background()
	oldCA, newCA := newCA(t, "old"), newCA(t, "new")
	bundles := [][]byte{pemOf(oldCA), pemOf(oldCA)}
	g := &Gate{Settle: 3 * time.Second, Bundles: func(context.Context) ([][]byte, error) { return bundles, nil }}
	served := func() *tls.Certificate { c, _ := g.GetCertificate(nil); return c }

	if _, err := g.GetCertificate(nil); err == nil {
		t.Fatal("GetCertificate before any certificate: no error")
	}
	first, second := oldCA.serving(t), newCA.serving(t)
	g.consider(ctx, first, t0)
	if served() != first {
		t.Fatal("the first certificate is not served at once")
	}
	g.consider(ctx, second, t0.Add(time.Second))
	if served() != first {
		t.Fatal("a certificate of a CA no caBundle trusts is served")
	}
	bundles = [][]byte{pemOf(newCA, oldCA), pemOf(oldCA)}
	g.consider(ctx, second, t0.Add(2*time.Second))
	if served() != first {
		t.Fatal("a certificate that one caBundle does not trust is served")
	}
	bundles = [][]byte{pemOf(newCA, oldCA), pemOf(newCA, oldCA)}
	g.consider(ctx, second, t0.Add(3*time.Second))
	g.consider(ctx, second, t0.Add(5*time.Second))
	if served() != first {
		t.Fatal("a certificate trusted for less than Settle is served")
	}
	g.consider(ctx, second, t0.Add(6*time.Second))
	if served() != second {
		t.Fatal("a certificate trusted for Settle is not served")
	}
}

func TestTrusts(t *testing.T) {
	oldCA, newCA := newCA(t, "old"), newCA(t, "new")
	leaf := newCA.serving(t).Certificate
	for name, tc := range map[string]struct {
		bundle []byte
		now    time.Time
		want   bool
	}{
		"its CA":                 {pemOf(newCA), t0, true},
		"a bundle with its CA":   {pemOf(oldCA, newCA), t0, true},
		"another CA":             {pemOf(oldCA), t0, false},
		"empty":                  {nil, t0, false},
		"after the leaf expires": {pemOf(newCA), t0.Add(13 * time.Hour), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := trusts(tc.bundle, leaf, tc.now); got != tc.want {
				t.Errorf("trusts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGateCollectorExportsTheServedExpiry: nothing while no certificate is served, then the
// served leaf's NotAfter in Unix seconds.
func TestGateCollectorExportsTheServedExpiry(t *testing.T) {
	g := &Gate{Bundles: func(context.Context) ([][]byte, error) { return nil, nil }}
	if n := testutil.CollectAndCount(g.Collector()); n != 0 {
		t.Fatalf("%d series before any certificate is served, want none", n)
	}
	g.consider(context.Background(), newCA(t, "ca").serving(t), t0)
	want := fmt.Sprintf("# HELP %s NotAfter of the webhook serving certificate this replica serves (with --cert-rotation), in seconds since the Unix epoch; absent while none is served.\n# TYPE %[1]s gauge\n%[1]s %g\n",
		MetricCertificateExpiry, float64(t0.Add(12*time.Hour).Unix()))
	if err := testutil.CollectAndCompare(g.Collector(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
