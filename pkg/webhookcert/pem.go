// Package webhookcert makes a change of the webhook's certificate authority (CA) invisible to
// the API server: the caBundle of the webhook configurations carries the previous CA beside
// the new one for an overlap period (BundleReconciler), and a replica serves a certificate
// from the new CA only once every caBundle trusts it (Gate). The certificates themselves
// come from open-policy-agent/cert-controller's rotator, which writes a new CA and a new
// serving certificate into the Secret together.
package webhookcert

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"time"
)

// parseCAs returns the certificates of the PEM data that are CAs (basicConstraints CA:TRUE)
// and still valid at now, in their order, each once. Blocks that are not certificates, that
// do not parse or that are no CA are skipped: a caBundle written by someone else may hold
// anything, and only a usable CA is worth keeping.
func parseCAs(data []byte, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || !c.IsCA || now.After(c.NotAfter) || containsCert(out, c) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// containsCert reports whether certs holds c (the same DER bytes).
func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, o := range certs {
		if bytes.Equal(o.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// encodePEM returns the certificates as concatenated PEM CERTIFICATE blocks, in order.
func encodePEM(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// trusts reports whether the PEM caBundle verifies leaf (with the serving certificate's
// other certificates as intermediates) for server authentication at now.
func trusts(caBundle []byte, chain [][]byte, now time.Time) bool {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) || len(chain) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return false
	}
	inter := x509.NewCertPool()
	for _, der := range chain[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err == nil
}
