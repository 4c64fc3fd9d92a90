package aio_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// injector runs a write of another process's at a chosen point of a store's command
// stream: just before the first update command that names the given path is sent, after
// the find that read the item.
type injector struct {
	mu    sync.Mutex
	path  string
	write func()
}

func (in *injector) monitor() *mongoevent.CommandMonitor {
	return &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName != "update" {
			return
		}
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.write != nil && strings.Contains(e.Command.String(), in.path) {
			w := in.write
			in.write = nil
			w()
		}
	}}
}

// Fail is a read, then a write guarded by what the read saw. Another process's write in
// between is never undone: an ack of the entry makes the move to dead match nothing (the
// entry is not dead, not pending, and the counts are right), and another relay's failure
// record makes the write read again and count both failures.
func TestFailIsGuardedAgainstAWriteInBetween(t *testing.T) {
	db := testDatabase(t)
	in := &injector{}
	s, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db,
		ClientOptions: options.Client().SetMonitor(in.monitor())}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(bg) })
	other, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(bg) })
	raw, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Disconnect(bg) })
	coll := raw.Database(db).Collection("executions")

	exe := newExe("guarded")
	seqs, err := s.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("a")}, {TargetID: "t", Event: []byte("b")}}})
	require.NoError(t, err)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	// An ack between the read and the move to dead.
	in.mu.Lock()
	in.path, in.write = "outbox.", func() { require.NoError(t, other.AckOutbox(bg, exe.ID, seqs[0])) }
	in.mu.Unlock()
	_, ok, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		execstore.Failure{Error: "x", At: at, Dead: true})
	require.NoError(t, err)
	assert.False(t, ok, "acked in between: not pending any more")
	var doc bson.M
	require.NoError(t, coll.FindOne(bg, bson.D{{Key: "_id", Value: exe.ID}}).Decode(&doc))
	assert.EqualValues(t, 1, doc["outbox_n"], "only the ack's decrement")
	assert.Nil(t, doc["dead"], "nothing moved to dead")

	// Another relay's failure record between the read and the write.
	ref := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1]}
	in.mu.Lock()
	in.write = func() {
		_, ok, err := other.Fail(bg, ref, execstore.Failure{Error: "theirs", At: at})
		require.NoError(t, err)
		require.True(t, ok)
	}
	in.mu.Unlock()
	a, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "mine", At: at.Add(time.Second)})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, a.Count, "both failures counted")
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 1)
	assert.Equal(t, 2, p[0].Attempts.Count)
	assert.Equal(t, "mine", p[0].Attempts.LastError)
}
