// Package tcpproxy is a loopback TCP proxy for tests that take a store's
// database away while Rota runs: Start forwards connections from a local
// port to a target until Cut, which closes the listener and every
// connection (to the client, the database is gone: its connections drop,
// new ones are refused). A new Start on the same address brings it back.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections from Addr to its target until Cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	cutOff bool // set by Cut: a connection accepted just before is closed at once
	wg     sync.WaitGroup
}

// Start listens on listen (e.g. "127.0.0.1:0") and forwards each
// connection to target; the test's cleanup cuts it.
func Start(t testing.TB, listen, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.Cut)
	return p
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cutOff {
			// Accepted as Cut closed the listener: Cut has already closed
			// the connections it knew, so close this one here (else its
			// copies would wait forever, and so would Cut).
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(u, c); u.Close() })
		p.wg.Go(func() { io.Copy(c, u); c.Close() })
	}
}

// Cut closes the listener and every connection, and waits for the copies
// to end. It may be called more than once.
func (p *Proxy) Cut() {
	p.ln.Close()
	p.mu.Lock()
	p.cutOff = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
