package journal

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
)

// A write whose answer never comes back (the connection cut after it was sent, or its
// write timeout passing) is an unknown outcome, and the journal then refuses every
// mutation until Reverify has read the invocation; it goes on from what Reverify found.
func TestUnansweredWriteMakesTheJournalUncertain(t *testing.T) {
	for _, cut := range []bool{true, false} {
		name := "write timeout"
		if cut {
			name = "connection cut"
		}
		t.Run(name, func(t *testing.T) {
			proxy, uri := testserver.Proxied(t, server.URI, "")
			var armed atomic.Bool
			fired := make(chan struct{}, 1)
			monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
				if e.CommandName == "update" && armed.CompareAndSwap(true, false) {
					proxy.AnswersStalled.Store(true)
					fired <- struct{}{}
				}
			}}
			opts := testOptions(t)
			opts.ClientOptions = options.Client().SetMonitor(monitor)
			if !cut {
				opts.WriteTimeout = 300 * time.Millisecond
			}
			j, err := Open(bg, uri, testRing, opts)
			require.NoError(t, err)
			defer j.Close(bg)

			id := ident("cut")
			f, err := j.Claim(bg, id, "worker-1")
			require.NoError(t, err)
			armed.Store(true)
			done := make(chan error, 1)
			go func() {
				_, _, err := j.Checkpoint(bg, f, PhaseBefore, []byte("sent, never answered"))
				done <- err
			}()
			<-fired
			time.Sleep(100 * time.Millisecond) // sent, and applied by the server
			if cut {
				proxy.CloseAll()
			}
			err = <-done
			proxy.AnswersStalled.Store(false)
			var unknown *execstore.OutcomeUnknownError
			require.ErrorAs(t, err, &unknown)
			assert.Equal(t, "checkpoint", unknown.Op)
			assert.Equal(t, []string{id.ID}, j.Uncertain())

			// Every mutation is refused, of this invocation and any other; reads are not.
			_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("again"))
			require.ErrorIs(t, err, ErrUncertain)
			_, err = j.Claim(bg, ident("other"), "worker-1")
			require.ErrorIs(t, err, ErrUncertain)
			_, err = j.Dispatch(bg, f)
			require.ErrorIs(t, err, ErrUncertain)
			_, err = j.Reconcile(bg, f, Receipt{Attempt: 1, Outcome: Failed})
			require.ErrorIs(t, err, ErrUncertain)
			require.ErrorIs(t, j.VerifyOwner(bg, f), execstore.ErrConflict, "the write landed: f is stale")
			assert.Equal(t, []string{id.ID}, j.Uncertain(), "a read that is not Reverify cleared the state")

			inv, err := j.Reverify(bg, id.ID)
			require.NoError(t, err)
			assert.Empty(t, j.Uncertain())
			require.NotNil(t, inv.Checkpoint)
			assert.Equal(t, "sent, never answered", string(inv.Checkpoint.State))
			assert.EqualValues(t, 2, inv.Revision)
			_, _, err = j.Checkpoint(bg, inv.Fence(), PhaseBefore, []byte("after reverify"))
			require.NoError(t, err)
		})
	}
}
