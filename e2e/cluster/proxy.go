package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy stands in for the webhook Service on loopback: a TCP proxy that hands each new
// connection to the next ready backend, round robin, as kube-proxy spreads connections over a
// Service's ready endpoints. TLS passes through untouched, so the apiserver verifies the
// replicas' own certificate. A backend that refuses the connection is skipped (as a crashed
// pod's endpoint would be, once its readiness probe failed); when no backend accepts, the
// client's connection is closed, which the apiserver reports as a failed webhook call.
type Proxy struct {
	// Addr is the proxy's listen address, 127.0.0.1:<port>.
	Addr string

	ln       net.Listener
	mu       sync.Mutex
	backends []string // index = replica; "" = not an endpoint now
	next     atomic.Uint64
	conns    sync.WaitGroup
	closed   chan struct{}
	accepted []atomic.Int64 // connections handed to each backend
}

// StartProxy listens on a free loopback port with n backend slots, all empty.
func StartProxy(n int) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the webhook proxy: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, backends: make([]string, n), closed: make(chan struct{}),
		accepted: make([]atomic.Int64, n)}
	go p.serve()
	return p, nil
}

// SetBackend makes addr (host:port) the endpoint of slot i, or removes the slot's endpoint
// when addr is "": new connections no longer go there, open ones are left to finish.
func (p *Proxy) SetBackend(i int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends[i] = addr
}

// Connections returns how many connections the proxy has handed to slot i so far.
func (p *Proxy) Connections(i int) int64 { return p.accepted[i].Load() }

// Close stops accepting connections and waits for the open ones to end.
func (p *Proxy) Close() {
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	_ = p.ln.Close()
	p.conns.Wait()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.forward(c)
		}()
	}
}

// forward connects c to the next ready backend that accepts a connection, trying each at most
// once, and copies both ways until either side closes.
func (p *Proxy) forward(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	backends := append([]string(nil), p.backends...)
	p.mu.Unlock()
	start := p.next.Add(1)
	var upstream net.Conn
	for k := range backends {
		i := int((start + uint64(k)) % uint64(len(backends)))
		if backends[i] == "" {
			continue
		}
		u, err := net.DialTimeout("tcp", backends[i], time.Second)
		if err != nil {
			continue
		}
		p.accepted[i].Add(1)
		upstream = u
		break
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, c)
	go pipe(c, upstream)
	select {
	case <-done:
		<-done
	case <-p.closed:
	}
}
