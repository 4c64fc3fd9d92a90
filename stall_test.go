package execstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// stallProxy relays TCP connections to upstream and can hold every byte while stalled.
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(u, c) })
			p.wg.Go(func() { p.pipe(c, u) })
		}
	})
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && p.stalled.Load() {
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

func (p *stallProxy) close() {
	p.stalled.Store(false)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// While the server does not answer, a caller whose commit waits for a batch slot gets its
// context error on time (never sent), one whose batch was sent gets ErrOutcomeUnknown on
// time, and Close returns within its context.
func TestCallersAnsweredOnTimeWhileServerStalls(t *testing.T) {
	cs, err := connstring.Parse(server.URI)
	require.NoError(t, err)
	proxy := newStallProxy(t, cs.Hosts[0])
	uri := strings.Replace(server.URI, cs.Hosts[0], proxy.ln.Addr().String(), 1)
	s, err := aio.Open(bg, uri, aio.Options{Database: testDatabase(t), GroupCommitInFlight: 1})
	require.NoError(t, err)

	a, b := newExe("a"), newExe("b")
	require.NoError(t, s.Save(bg, a))
	require.NoError(t, s.Save(bg, b))
	proxy.stalled.Store(true)

	sentCtx, cancelSent := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelSent()
	sent := s.CommitAsync(sentCtx, a, execstore.Commit{})
	time.Sleep(50 * time.Millisecond) // a's batch is on the wire and holds the only slot

	start := time.Now()
	queuedCtx, cancelQueued := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancelQueued()
	_, err = s.Commit(queuedCtx, b, execstore.Commit{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "b was never sent")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.EqualValues(t, 1, b.Version)

	_, err = sent.Wait(sentCtx)
	assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)

	stuck := s.CommitAsync(bg, b, execstore.Commit{}) // a caller that never gives up
	closeCtx, cancelClose := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelClose()
	start = time.Now()
	err = s.Close(closeCtx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second)
	_, err = stuck.Result()
	assert.Error(t, err)

}
