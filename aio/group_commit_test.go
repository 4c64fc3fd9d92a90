package aio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// The group commit's pipeline without a server, in the manner of pebble's commit tests: the
// bulk write is a stand-in that records each batch and answers as told.

// fakeWriter is a batchWriter that records batches and blocks them until gate is closed.
type fakeWriter struct {
	mu      sync.Mutex
	batches [][]string    // the ids of each batch, in order
	gate    chan struct{} // closed by the test to let batches answer
	entered chan struct{} // receives once per batch that started
	answer  func(p *ops.CommitPlan) error
}

func (w *fakeWriter) write(ctx context.Context, _ opsrun.Settle, _ opsrun.Env, plans []*ops.CommitPlan) []error {
	ids := make([]string, len(plans))
	for i, p := range plans {
		ids[i] = p.ID
	}
	w.mu.Lock()
	w.batches = append(w.batches, ids)
	w.mu.Unlock()
	w.entered <- struct{}{}
	<-w.gate
	errs := make([]error, len(plans))
	for i, p := range plans {
		if w.answer != nil {
			errs[i] = w.answer(p)
		}
	}
	return errs
}

// open lets every batch answer, now and from now on.
func (w *fakeWriter) open() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.gate:
	default:
		close(w.gate)
	}
}

// idle waits until the store's workers have handed every submitted commit on.
func idle(t *testing.T, s *Store) {
	t.Helper()
	quiet := 0
	require.Eventually(t, func() bool {
		if s.pool.Len() == 0 && s.pool.InFlight() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		return quiet >= 5
	}, 5*time.Second, 2*time.Millisecond, "the workers never went idle")
}

// groupStore returns a store with no server, built as open builds one, whose group commit
// writes through w; coalescing is off, so only commits are batched.
func groupStore(t *testing.T, w *fakeWriter) *Store {
	t.Helper()
	opts := Options{MaxBatchesInFlight: 1, Connection: server.Connection{Workers: 16, QueueDepth: 64}, DisableCoalescing: true}
	s := newStore(storeEnv{
		info:       server.Info{Profile: server.MongoDB},
		env:        opsrun.Env{Layout: ops.Layout{Profile: server.MongoDB, TraceMax: 10}},
		opts:       opts.withDefaults(server.MongoDB),
		stats:      newStatCounters(),
		writeBatch: w.write,
	})
	t.Cleanup(func() {
		w.open()
		require.NoError(t, s.Close(context.Background()))
	})
	return s
}

func existing(id string) *execstore.Execution {
	return &execstore.Execution{ID: id, Status: execstore.Running, Version: 3}
}

// While one batch is being written, the commits that arrive gather into the next; a lone
// commit goes out at once; each caller learns its own outcome, and only winners' versions move.
func TestGroupCommitPipeline(t *testing.T) {
	w := &fakeWriter{gate: make(chan struct{}), entered: make(chan struct{}, 16),
		answer: func(p *ops.CommitPlan) error {
			if p.ID == "lost" {
				return &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: p.Expected + 1}
			}
			return nil
		}}
	s := groupStore(t, w)
	first := existing("first")
	f0 := s.CommitAsync(context.Background(), first, execstore.Commit{})
	<-w.entered // the lone commit went out at once, alone

	exes := map[string]*execstore.Execution{}
	futures := map[string]*Future[[]int64]{}
	for _, id := range []string{"a", "b", "lost", "c"} {
		exes[id] = existing(id)
		futures[id] = s.CommitAsync(context.Background(), exes[id], execstore.Commit{})
	}
	idle(t, s) // the commits wait for the batch in flight
	w.open()   // the first batch answers, and the next
	_, err := f0.Wait(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 4, first.Version)
	for id, f := range futures {
		_, err := f.Wait(context.Background())
		if id == "lost" {
			assert.ErrorIs(t, err, execstore.ErrConflict)
			assert.EqualValues(t, 3, exes[id].Version, "a loser's version does not move")
			continue
		}
		require.NoError(t, err, id)
		assert.EqualValues(t, 4, exes[id].Version, id)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.batches, 2)
	assert.Equal(t, []string{"first"}, w.batches[0])
	assert.ElementsMatch(t, []string{"a", "b", "lost", "c"}, w.batches[1])
	assert.EqualValues(t, 2, s.stats.groupCommits.Load())
	assert.EqualValues(t, 5, s.stats.groupedCommits.Load())
}

// A caller whose context ends while its commit waits for a batch gets its context's error at
// once and the commit is never written; one whose context ends after its batch was sent gets
// ErrOutcomeUnknown at once, and the batch's later answer does not touch its execution.
func TestGroupCommitCallersGiveUp(t *testing.T) {
	w := &fakeWriter{gate: make(chan struct{}), entered: make(chan struct{}, 16)}
	s := groupStore(t, w)

	sentCtx, cancelSent := context.WithCancel(context.Background())
	sent := existing("sent")
	fSent := s.CommitAsync(sentCtx, sent, execstore.Commit{})
	<-w.entered // "sent" is being written

	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	queued := existing("queued")
	fQueued := s.CommitAsync(queuedCtx, queued, execstore.Commit{})
	idle(t, s)

	cancelQueued()
	_, err := fQueued.Wait(queuedCtx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "never sent")

	cancelSent()
	_, err = fSent.Wait(sentCtx)
	assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, context.Canceled)

	w.open() // the batch answers "won", too late for its caller
	require.NoError(t, s.pool.Close(context.Background()))
	s.group.Close() // every batch has answered
	assert.EqualValues(t, 3, sent.Version, "an abandoned commit's execution is not touched")
	assert.EqualValues(t, 3, queued.Version)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.batches {
		assert.NotContains(t, b, "queued", "a withdrawn commit was written")
	}
	assert.Equal(t, fmt.Sprint([][]string{{"sent"}}), fmt.Sprint(w.batches))
}

// A caller that gives up once its commit was sent may change its execution at once, even while
// the bulk write is still being encoded: the plan holds a copy of the snapshot. (Run with
// -race: the writer reads the plan's data while the caller overwrites its own.)
func TestGroupCommitAbandonedCallerOwnsItsExecution(t *testing.T) {
	written := make(chan string, 1)
	w := &fakeWriter{gate: make(chan struct{}), entered: make(chan struct{}, 4)}
	w.answer = func(p *ops.CommitPlan) error {
		for _, e := range p.Update[0].Value.(bson.D) {
			if e.Key == "data" {
				written <- string(e.Value.([]byte)) // what the bulk write would encode
			}
		}
		return nil
	}
	s := groupStore(t, w)
	exe := existing("x")
	exe.Data = []byte("committed")
	ctx, cancel := context.WithCancel(context.Background())
	f := s.CommitAsync(ctx, exe, execstore.Commit{})
	<-w.entered // sent: the writer holds the batch
	cancel()
	_, err := f.Wait(ctx)
	require.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	copy(exe.Data, "CHANGED!!") // the caller's to change at once
	w.open()
	assert.Equal(t, "committed", <-written)
	assert.EqualValues(t, 3, exe.Version, "the store no longer touches it")
}
