package aio_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/server"
)

// operations records the operation each command a client sends serves (aio.OperationOf).
type operations struct {
	mu  sync.Mutex
	ops []string
}

func (o *operations) monitor() *mongoevent.CommandMonitor {
	return &mongoevent.CommandMonitor{Started: func(ctx context.Context, e *mongoevent.CommandStartedEvent) {
		o.mu.Lock()
		o.ops = append(o.ops, aio.OperationOf(ctx)+" "+e.CommandName)
		o.mu.Unlock()
	}}
}

// take returns what was recorded since the last take.
func (o *operations) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.ops
	o.ops = nil
	return out
}

// A command monitor learns which operation each command serves: a handler's loads and
// commits, alone or batched, apart from the acks and timer deletes no commit carried, and the
// board's reads and writes.
func TestOperationOf(t *testing.T) {
	assert.Empty(t, aio.OperationOf(context.Background()))
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		ops := &operations{}
		opts.Connection = server.Connection{Database: testDatabase(t), ClientOptions: options.Client().SetMonitor(ops.monitor())}
		opts.AckWait = time.Millisecond // acks go alone at once
		store, _ := aiotest.Open(t, srv.URI, opts)
		b := wake.BoardOf(store)
		require.NoError(t, b.Publish(bg, "elsewhere", wake.Holding{Kind: wake.Outbox, Parts: []int{0}}))
		exe := newExe("x")
		_, err := store.Commit(bg, exe, execstore.Commit{})
		require.NoError(t, err)
		assert.Contains(t, ops.take(), "commit insert", "the creation")
		_, _, err = store.LoadForEvent(bg, "x", "ev")
		require.NoError(t, err)
		seqs, err := store.Commit(bg, exe, execstore.Commit{ProcessedEventID: "ev", Emits: []execstore.Emit{{TargetID: "y", Event: []byte("e")}}})
		require.NoError(t, err)
		got := ops.take()
		assert.Contains(t, got, "commit update")
		assert.True(t, slices.ContainsFunc(got, func(op string) bool { return strings.HasPrefix(op, "load_for_event ") }), "%v", got)
		for _, op := range got {
			// The seq blocks are reserved ahead of need, for no operation (findAndModify, and
			// the insert of the counter the first time).
			assert.Contains(t, []string{"load_for_event find", "load_for_event aggregate", "commit update", "wake find", "wake update",
				" findAndModify", " insert"}, op)
		}
		require.NoError(t, store.AckOutbox(bg, "x", seqs[0]))
		got = ops.take()
		assert.Contains(t, got, "ack_outbox update", "the ack no commit carried: %v", got)
		for _, op := range got {
			assert.Contains(t, []string{"ack_outbox update", "wake update", "wake find"}, op)
		}
		_, err = b.Marks(bg, "elsewhere")
		require.NoError(t, err)
		// A read of marks, sent once more when its first answer is late (hedged: a busy
		// server's read can be).
		got = ops.take()
		assert.Contains(t, [][]string{{"wake find"}, {"wake find", "wake find"}}, got)
	})
}
