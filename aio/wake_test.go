package aio_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/server"
)

// A won commit that emits, spawns or arms a timer wakes the relays and sweepers of its
// database and collection in this process, whichever store of it they were given, alone or
// grouped; one that writes none of these, or one on another collection, does not.
func TestCommitsWakeTheirNamespace(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		h := newHarness(t, aio.Options{DisableGroupCommit: !grouped})
		relayStore := h.reopen(t, aio.Options{Connection: server.Connection{Database: h.opts.Database}})
		elsewhere := h.reopen(t, aio.Options{Connection: server.Connection{Database: h.opts.Database, Collection: "other"}})
		sig, other := wake.Of(relayStore), wake.Of(elsewhere)
		require.NotNil(t, sig)
		require.Same(t, sig, wake.Of(h.store), "one signal per namespace")
		require.NotSame(t, sig, other)

		e := newExe("e")
		require.NoError(t, h.store.Save(bg, e))
		emitted, scheduled, foreign := sig.EmittedC(), sig.ScheduledC(), other.EmittedC()
		_, err := h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"k": 1}})
		require.NoError(t, err)
		assertOpen(t, emitted, "a commit with nothing to relay")
		assertOpen(t, scheduled, "a commit that arms no timer")

		_, err = h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("x")}}})
		require.NoError(t, err)
		assertClosed(t, emitted, "an emit")
		assertOpen(t, scheduled, "an emit arms no timer")

		emitted = sig.EmittedC()
		_, err = h.store.Commit(bg, e, execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "c"}}})
		require.NoError(t, err)
		assertClosed(t, emitted, "a spawn")

		_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(2e9))}})
		require.NoError(t, err)
		assertClosed(t, scheduled, "a timer")
		assertOpen(t, foreign, "a commit on another collection")
	}
}

func assertClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		assert.Fail(t, "no wake-up", what)
	}
}

func assertOpen(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
		assert.Fail(t, "a wake-up", what)
	default:
	}
}
