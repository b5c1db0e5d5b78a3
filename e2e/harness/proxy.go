package harness

import (
	"io"
	"net"
	"sync"
)

// Proxy is a TCP forwarder to the API server for one client (e.g. a scheduler whose kubeconfig
// points at URL). Cut closes every connection through it and refuses new ones, a network
// partition between that client and the API server; Heal ends the partition. TLS passes through
// untouched (the API server's certificate is for 127.0.0.1).
type Proxy struct {
	URL    string
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// StartProxy listens on a free loopback port and forwards to the API server.
func (cp *ControlPlane) StartProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	target := cp.URL[len("https://"):]
	p := &Proxy{URL: "https://" + ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track registers a forwarded pair, or closes it when the proxy was cut meanwhile.
func (p *Proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		_ = up.Close()
		return false
	}
	p.conns[c] = struct{}{}
	p.conns[up] = struct{}{}
	return true
}

// Cut closes every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal accepts connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.Cut()
	_ = p.ln.Close()
}

// WriteKubeconfigVia writes a kubeconfig for this API server reached through server (a Proxy's
// URL), authenticating with token.
func (cp *ControlPlane) WriteKubeconfigVia(path, server, token string) error {
	return cp.writeKubeconfig(path, server, token)
}
