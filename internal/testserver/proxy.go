package testserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// Relay is the TCP relay fault and wire tests build on: it listens and, once started, pairs
// each client connection with a new connection to upstream and hands the pair to serve, which
// runs in a goroutine of the relay's own. The test's cleanup stops it: the listener and every
// connection are closed, and every goroutine is waited for.
type Relay struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// NewRelay listens on listen ("127.0.0.1:0" for any port); Start begins relaying to upstream.
func NewRelay(t testing.TB, listen, upstream string) *Relay {
	ln, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	r := &Relay{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	t.Cleanup(r.stop)
	return r
}

// Start accepts connections until the relay stops, and serves each pair with serve.
func (r *Relay) Start(serve func(client, server net.Conn)) {
	r.wg.Go(func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", r.upstream)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns[c], r.conns[u] = true, true
			r.mu.Unlock()
			r.wg.Go(func() { serve(c, u) })
		}
	})
}

// Addr is the address clients connect to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Go runs f in a goroutine the relay waits for when it stops.
func (r *Relay) Go(f func()) { r.wg.Go(f) }

// CloseAll closes every connection relayed so far, as a network failure would.
func (r *Relay) CloseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// Reset closes conns with a TCP reset (RST) rather than an orderly close.
func (r *Relay) Reset(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		delete(r.conns, c)
	}
}

func (r *Relay) stop() {
	r.ln.Close()
	r.CloseAll()
	r.wg.Wait()
}

// StallProxy relays TCP connections to upstream. It holds every byte while Stalled, only the
// server's answers while AnswersStalled, and Reset closes every connection. After
// StallRequestWith(pattern), the next request that holds pattern is held, with every later
// byte of its connection, until the test ends: one slow command on one connection.
type StallProxy struct {
	*Relay
	Stalled        atomic.Bool
	AnswersStalled atomic.Bool

	stallOne atomic.Pointer[[]byte] // the pattern of the next request to hold; nil for none
	released chan struct{}          // closed when the test ends
	held     atomic.Int64           // reads of requests held so far
}

// HeldRequests is how many reads of requests the proxy has held so far (while Stalled, or
// by StallRequestWith): a test that stalls the proxy and then sends a command waits for it
// to grow, rather than for a while, to know the command reached the proxy and is held.
func (p *StallProxy) HeldRequests() int64 { return p.held.Load() }

// StallRequestWith holds the next request whose bytes contain pattern, and its connection,
// until the test ends.
func (p *StallProxy) StallRequestWith(pattern []byte) { p.stallOne.Store(&pattern) }

// NewStallProxy returns a StallProxy listening on listen ("127.0.0.1:0" for any port).
func NewStallProxy(t testing.TB, listen, upstream string) *StallProxy {
	p := &StallProxy{Relay: NewRelay(t, listen, upstream), released: make(chan struct{})}
	p.Start(func(client, server net.Conn) {
		p.Go(func() { p.pipe(server, client, &p.Stalled, true) })
		p.pipe(client, server, &p.AnswersStalled, false)
	})
	t.Cleanup(func() { // runs before the relay's own cleanup: nothing stays held
		p.Stalled.Store(false)
		p.AnswersStalled.Store(false)
		close(p.released)
	})
	return p
}

// Proxied returns a StallProxy in front of the server at uri and the URI that goes through it
// (a direct connection, with query appended).
func Proxied(t testing.TB, uri, query string) (*StallProxy, string) {
	t.Helper()
	cs, err := connstring.Parse(uri)
	require.NoError(t, err)
	p := NewStallProxy(t, "127.0.0.1:0", cs.Hosts[0])
	proxied := strings.Replace(uri, cs.Hosts[0], p.Addr(), 1)
	if strings.Contains(proxied, "?") {
		proxied += "&"
	} else {
		proxied += "?"
	}
	return p, proxied + "directConnection=true" + query
}

func (p *StallProxy) pipe(dst, src net.Conn, held *atomic.Bool, requests bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if pattern := p.stallOne.Load(); requests && pattern != nil && bytes.Contains(buf[:n], *pattern) && p.stallOne.CompareAndSwap(pattern, nil) {
			p.held.Add(1)
			<-p.released
		}
		if requests && n > 0 && p.Stalled.Load() {
			p.held.Add(1)
		}
		for n > 0 && (p.Stalled.Load() || held.Load()) {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				src.Close()
			}
			return
		}
	}
}
