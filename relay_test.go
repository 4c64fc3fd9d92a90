package execstore_test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// relay is the TCP relay the fault and wire tests build on: it listens and, once started,
// pairs each client connection with a new connection to upstream and hands the pair to
// serve, which runs in a goroutine of the relay's own. The test's cleanup stops it: the
// listener and every connection are closed, and every goroutine is waited for.
type relay struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// newRelay listens on listen; start begins relaying to upstream.
func newRelay(t *testing.T, listen, upstream string) *relay {
	ln, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	r := &relay{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	t.Cleanup(r.stop)
	return r
}

// start accepts connections until the relay stops, and serves each pair with serve.
func (r *relay) start(serve func(client, server net.Conn)) {
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

// addr is the address clients connect to.
func (r *relay) addr() string { return r.ln.Addr().String() }

// goRun runs f in a goroutine the relay waits for when it stops.
func (r *relay) goRun(f func()) { r.wg.Go(f) }

// closeAll closes every connection relayed so far, as a network failure would.
func (r *relay) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// reset closes conns with a TCP reset (RST) rather than an orderly close.
func (r *relay) reset(conns ...net.Conn) {
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

func (r *relay) stop() {
	r.ln.Close()
	r.closeAll()
	r.wg.Wait()
}
