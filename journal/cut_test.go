package journal

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
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
			proxy, uri := testserver.Proxied(t, srv.URI, "")
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
			j, err := Open(bg, uri, testRing, opts)
			require.NoError(t, err)
			defer j.Close(bg)

			coll := rawCollection(t, j)

			id := ident("cut")
			f, err := j.Claim(bg, id, "worker-1")
			require.NoError(t, err)
			// The short write timeout bounds the stalled checkpoint alone: the claim before it
			// and the writes after it run under the default, however slow the machine.
			writeTimeout := j.opts.WriteTimeout
			if !cut {
				j.opts.WriteTimeout = 300 * time.Millisecond
			}
			armed.Store(true)
			done := make(chan error, 1)
			go func() {
				_, _, err := j.Checkpoint(bg, f, PhaseBefore, []byte("sent, never answered"))
				done <- err
			}()
			<-fired
			// Sent: read past the proxy until the server has applied it, so that only its
			// answer is missing when the connection is cut or the timeout passes.
			require.Eventually(t, func() bool {
				var d document
				err := coll.FindOne(bg, bson.D{{Key: "_id", Value: id.ID}}).Decode(&d)
				return err == nil && d.Rev == 2
			}, 30*time.Second, 5*time.Millisecond, "the checkpoint never reached the server")
			if cut {
				proxy.CloseAll()
			}
			err = <-done
			proxy.AnswersStalled.Store(false)
			j.opts.WriteTimeout = writeTimeout
			var unknown *execstore.OutcomeUnknownError
			require.ErrorAs(t, err, &unknown)
			assert.Equal(t, "checkpoint", unknown.Op)
			assert.Contains(t, err.Error(), `checkpoint of journal invocation "`+id.ID+`"`)
			assert.NotContains(t, err.Error(), "execution")
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

// A read whose answer decides the caller's next step fails closed: cut, it is an
// *execstore.OutcomeUnknownError and the journal is uncertain about the invocation (every
// mutation refused) until Reverify succeeds. That holds for VerifyOwner, for Reverify itself,
// and for the read that says why a guarded write matched nothing. Read, HasInvocation and
// Dispatch's read before its write decide nothing the journal guards: they fail with the
// read's error and leave the journal as it was.
func TestFailedDecidingReadMakesTheJournalUncertain(t *testing.T) {
	proxy, uri := testserver.Proxied(t, srv.URI, "")
	var armed atomic.Bool
	fired := make(chan struct{}, 1)
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "find" && armed.CompareAndSwap(true, false) {
			proxy.AnswersStalled.Store(true)
			fired <- struct{}{}
		}
	}}
	opts := testOptions(t)
	// The driver retries a read once after a network error; without that retry, one cut is
	// the read's failure (with it, the retry would have to be cut too).
	opts.ClientOptions = options.Client().SetMonitor(monitor).SetRetryReads(false)
	j, err := Open(bg, uri, testRing, opts)
	require.NoError(t, err)
	defer j.Close(bg)

	// cut runs call and cuts every connection once its next find is sent, before the answer
	// comes back.
	cut := func(call func() error) error {
		t.Helper()
		armed.Store(true)
		done := make(chan error, 1)
		go func() { done <- call() }()
		<-fired
		time.Sleep(50 * time.Millisecond)
		proxy.CloseAll()
		err := <-done
		proxy.AnswersStalled.Store(false)
		require.Error(t, err, "the cut read succeeded")
		return err
	}
	var unknown *execstore.OutcomeUnknownError

	id := ident("read-cut")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)

	// VerifyOwner.
	err = cut(func() error { return j.VerifyOwner(bg, f) })
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "verify owner", unknown.Op)
	assert.Equal(t, id.ID, unknown.ExecutionID)
	assert.Equal(t, "journal invocation", unknown.Noun)
	assert.Contains(t, err.Error(), `execstore: verify owner of journal invocation "`+id.ID+`": outcome unknown`)
	assert.NotContains(t, err.Error(), "execution")
	assert.Equal(t, []string{id.ID}, j.Uncertain())
	_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("after a failed verify"))
	require.ErrorIs(t, err, ErrUncertain)

	// Reverify's own read, cut, clears nothing; one that succeeds does.
	err = cut(func() error { _, err := j.Reverify(bg, id.ID); return err })
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "reverify", unknown.Op)
	assert.Equal(t, []string{id.ID}, j.Uncertain())
	inv, err := j.Reverify(bg, id.ID)
	require.NoError(t, err)
	assert.Empty(t, j.Uncertain())
	assert.Equal(t, f, inv.Fence())

	// Reverify of an invocation the journal was certain about, cut: now it is not.
	other := ident("read-cut-other")
	_, err = j.Claim(bg, other, "worker-1")
	require.NoError(t, err)
	err = cut(func() error { _, err := j.Reverify(bg, other.ID); return err })
	require.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.Equal(t, []string{other.ID}, j.Uncertain())
	_, err = j.Reverify(bg, other.ID)
	require.NoError(t, err)
	assert.Empty(t, j.Uncertain())

	// The read after a missed guard: a stale fence's checkpoint matches nothing (answered:
	// nothing written), and the read that would say why is cut.
	f2, _, err := j.Checkpoint(bg, f, PhaseBefore, []byte("one"))
	require.NoError(t, err)
	err = cut(func() error { _, _, err := j.Checkpoint(bg, f, PhaseBefore, []byte("stale")); return err })
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "checkpoint", unknown.Op)
	assert.Equal(t, []string{id.ID}, j.Uncertain())
	_, err = j.Prepare(bg, f2, "any", []byte("op"))
	require.ErrorIs(t, err, ErrUncertain)
	inv, err = j.Reverify(bg, id.ID)
	require.NoError(t, err)
	assert.Equal(t, f2, inv.Fence())
	assert.Equal(t, "one", string(inv.Checkpoint.State))

	// Reads that decide nothing the journal guards.
	for name, call := range map[string]func() error{
		"read":           func() error { _, err := j.Read(bg, id.ID); return err },
		"has invocation": func() error { _, err := j.HasInvocation(bg, id); return err },
		"dispatch": func() error { // its read comes before its write: nothing was sent
			_, err := j.Dispatch(bg, f2)
			return err
		},
	} {
		err := cut(call)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, name)
		assert.Empty(t, j.Uncertain(), name)
	}
	inv, err = j.Read(bg, id.ID)
	require.NoError(t, err)
	assert.Equal(t, f2, inv.Fence(), "a dispatch whose read failed wrote")
	assert.Zero(t, inv.Attempts)
}
