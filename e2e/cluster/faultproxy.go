package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Faults is what a FaultProxy does to the requests it forwards while faults are on: each
// request is, at random with these probabilities (their sum at most 1), answered 500, answered
// 429 with Retry-After: 1, or held for Stall before it is forwarded; the rest are forwarded
// as they are. Watch requests are left alone (the informers' connections), so that the
// fault is a brownout of requests, not a restart of every watch.
type Faults struct {
	Error, TooManyRequests, StallProbability float64
	Stall                                    time.Duration
}

// FaultProxy is an HTTPS reverse proxy on loopback in front of the kube-apiserver, for
// brownout faults: a manager whose kubeconfig points at it (ManagerOptions.ThroughFaultProxy)
// reaches the API server only through it. Its serving certificate is signed by the control
// plane's CA, so the same kubeconfig CA verifies it; the client's Authorization header is
// forwarded unchanged.
type FaultProxy struct {
	// URL is the proxy's address, https://127.0.0.1:<port>.
	URL string
	// Counts of requests answered with an injected error or 429, held, and forwarded.
	Errors, TooManyRequests, Stalled, Forwarded atomic.Int64

	mu     sync.Mutex
	faults *Faults
	srv    *http.Server
}

// StartFaultProxy starts a FaultProxy in front of the control plane's API server, forwarding
// everything until SetFaults turns faults on. It is closed with the control plane.
func (c *ControlPlane) StartFaultProxy() (*FaultProxy, error) {
	certPEM, keyPEM, err := c.PKI.IssueServing("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("fault proxy certificate: %w", err)
	}
	target, err := url.Parse(c.URL)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.PKI.CACertPEM)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 100}
	rp.FlushInterval = -1 // watches stream
	// The upstream's own outages (a restarted API server) are answered 502; the test counts
	// what matters, the log would only repeat it.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the fault proxy: %w", err)
	}
	p := &FaultProxy{URL: "https://" + ln.Addr().String()}
	p.srv = &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, rp) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
	}
	go func() {
		if err := p.srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("fault proxy:", err)
		}
	}()
	c.cleanups = append(c.cleanups, func() { _ = p.srv.Close() })
	return p, nil
}

// SetFaults turns faults on (f) or off (nil).
func (p *FaultProxy) SetFaults(f *Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	if f != nil && r.URL.Query().Get("watch") != "true" && !strings.Contains(r.URL.Path, "/watch/") {
		switch x := rand.Float64(); {
		case x < f.Error:
			p.Errors.Add(1)
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the fault proxy","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			return
		case x < f.Error+f.TooManyRequests:
			p.TooManyRequests.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the fault proxy","reason":"TooManyRequests","code":429}`, http.StatusTooManyRequests)
			return
		case x < f.Error+f.TooManyRequests+f.StallProbability:
			p.Stalled.Add(1)
			select {
			case <-time.After(f.Stall):
			case <-r.Context().Done():
				return
			}
		}
	}
	p.Forwarded.Add(1)
	next.ServeHTTP(w, r)
}
