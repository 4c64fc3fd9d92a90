package idem

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// newCutProxy returns a proxy in front of the test server and the URI that goes through it:
// while AnswersStalled it holds the server's answers, while Stalled every byte; CloseAll cuts
// every connection.
func newCutProxy(t *testing.T) (*testserver.StallProxy, string) {
	return testserver.Proxied(t, srv.URI, "")
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
						proxy.AnswersStalled.Store(true)
					} else {
						proxy.Stalled.Store(true)
					}
					fired.Store(true)
				}
			}}
			db := testDatabase(t)
			s, err := Open(bg, uri, Options{Connection: server.Connection{Database: db, ClientOptions: options.Client().SetMonitor(monitor).SetRetryWrites(false)}})
			require.NoError(t, err)
			defer s.Close(bg)
			direct := openStore(t, Options{Connection: server.Connection{Database: db}})
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
				if answerOnly {
					// Sent: wait until the server applied it, by asking it, not by a sleep
					// a busy server may outlast.
					require.Eventually(t, func() bool {
						rec, err := direct.Get(bg, key)
						return err == nil && rec != nil
					}, 30*time.Second, 5*time.Millisecond, "round %d: the claim's write applied", round)
				} else {
					// A window for a write wrongly sent to arrive: a busy machine makes the
					// check weaker, never wrong.
					time.Sleep(100 * time.Millisecond)
				}
				proxy.CloseAll()
				proxy.Stalled.Store(false)
				proxy.AnswersStalled.Store(false)
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
