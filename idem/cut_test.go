package idem

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
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
)

// cutProxy relays TCP connections to the server. While held, it holds the bytes of one
// direction (only the server's answers, or both); cut closes every connection.
type cutProxy struct {
	ln          net.Listener
	upstream    string
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
	holdAnswers atomic.Bool
	holdAll     atomic.Bool
}

func newCutProxy(t *testing.T) (*cutProxy, string) {
	cs, err := connstring.Parse(server.URI)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, upstream: cs.Hosts[0]}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(u, c, &p.holdAll) })
			p.wg.Go(func() { p.pipe(c, u, &p.holdAnswers) })
		}
	})
	t.Cleanup(func() {
		p.holdAll.Store(false)
		p.holdAnswers.Store(false)
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	uri := strings.Replace(server.URI, cs.Hosts[0], ln.Addr().String(), 1)
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	return p, uri + sep + "directConnection=true"
}

func (p *cutProxy) pipe(dst, src net.Conn, held *atomic.Bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && (p.holdAll.Load() || held.Load()) {
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

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A connection cut after a claim's write was sent: the claim is settled exactly (its token
// read back) or reported ErrOutcomeUnknown — never a wrong answer. When only the answer was
// lost the server has the claim; when the request was lost it has not.
func TestConnectionCutAfterClaimSent(t *testing.T) {
	for _, answerOnly := range []bool{true, false} {
		name := "request lost"
		if answerOnly {
			name = "answer lost"
		}
		t.Run(name, func(t *testing.T) {
			proxy, uri := newCutProxy(t)
			var armed, fired atomic.Bool
			monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
				write := e.CommandName == "insert" || e.CommandName == "update" || e.CommandName == "findAndModify"
				if write && armed.CompareAndSwap(true, false) {
					if answerOnly {
						proxy.holdAnswers.Store(true)
					} else {
						proxy.holdAll.Store(true)
					}
					fired.Store(true)
				}
			}}
			db := testDatabase(t)
			s, err := Open(bg, uri, Options{Database: db,
				ClientOptions: options.Client().SetMonitor(monitor).SetRetryWrites(false)})
			require.NoError(t, err)
			defer s.Close(bg)
			direct := openStore(t, Options{Database: db})
			for round := range 3 {
				key := name + string(rune('a'+round))
				armed.Store(true)
				fired.Store(false)
				type result struct {
					c   Claim
					err error
				}
				done := make(chan result, 1)
				go func() {
					c, err := s.Claim(bg, key, fp, 1, longLease)
					done <- result{c, err}
				}()
				require.Eventually(t, fired.Load, 10*time.Second, time.Millisecond)
				time.Sleep(100 * time.Millisecond) // sent, and (answer lost) applied
				proxy.cut()
				proxy.holdAll.Store(false)
				proxy.holdAnswers.Store(false)
				r := <-done
				rec, err := direct.Get(bg, key)
				require.NoError(t, err)
				if r.err != nil {
					require.ErrorIs(t, r.err, execstore.ErrOutcomeUnknown, "round %d", round)
				} else {
					require.True(t, r.c.Settled, "round %d: an unsettled answer to a cut write", round)
					require.Equal(t, New, r.c.Outcome)
					require.NotNil(t, rec)
					assert.Equal(t, rec.token, r.c.Token, "round %d: settled with a token the server does not have", round)
				}
				if answerOnly {
					assert.NotNil(t, rec, "the server had the claim")
					assert.NoError(t, r.err, "an answer-lost claim is settled by reading its token back")
				} else {
					assert.Nil(t, rec, "the server never got the claim")
				}
				// The store recovers by itself.
				_, err = s.Get(bg, key)
				require.NoError(t, err)
			}
		})
	}
}
