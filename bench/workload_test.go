package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// ackOrderStore is the memory variant's store with the handlers' commits slowed down (by
// commitDelay, so that scans find entries a handler still has), noting every ack sent before
// a commit had processed the entry's event.
type ackOrderStore struct {
	memStore
	w           *workload
	commitDelay time.Duration

	mu    sync.Mutex
	early []string // entries acked before their event was processed
}

func (s *ackOrderStore) commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) error {
	if exe.Version > 0 { // a handler's, not a create
		time.Sleep(s.commitDelay)
	}
	return s.memStore.commit(ctx, exe, c)
}

// relayStore is the memory store with its acks watched.
func (s *ackOrderStore) relayStore() execstore.Store {
	return &ackWatch{Store: s.memStore.relayStore(), s: s}
}

// ackWatch notes each ack of an entry whose event no commit had processed yet.
type ackWatch struct {
	execstore.Store
	s *ackOrderStore
}

func (a *ackWatch) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	entries, err := a.Store.PendingOutbox(ctx, 0)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.SourceID != sourceID || e.Seq != seq {
			continue
		}
		n, err := parseEvent(e.Event)
		if err != nil {
			return err
		}
		a.s.w.mu.Lock()
		processed := a.s.w.processed[n] > 0
		a.s.w.mu.Unlock()
		if !processed {
			a.s.mu.Lock()
			a.s.early = append(a.s.early, fmt.Sprintf("seq %d (%s)", seq, e.Event))
			a.s.mu.Unlock()
		}
	}
	return a.Store.AckOutbox(ctx, sourceID, seq)
}

// The relay (package relay) acks an entry only after a handler has processed it, and delivers
// an entry again only when its first ack was withheld (-redeliver), never while a handler
// still has it; the end-of-run checks pass.
func TestRelayAcksOnlyHandledEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{executions: 8, events: 48, seed: 1, redeliver: 0.2}
		s := &ackOrderStore{commitDelay: 5 * time.Millisecond}
		w := newEngine(cfg, s)
		s.w = w
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, w.setup(ctx))
		require.NoError(t, w.run(ctx, 2, &loop{}))
		require.NoError(t, w.finish(ctx))
		cs, err := w.check(ctx)
		require.NoError(t, err)
		assert.Empty(t, failedChecks(cs))

		assert.Empty(t, s.early, "entries acked before a commit had processed their event")
		withheld := 0
		for n := range cfg.events {
			if w.withholdAck(n) {
				withheld++
			}
		}
		require.Positive(t, withheld, "the seed withholds no ack: nothing is redelivered")
		assert.EqualValues(t, withheld, w.redelivered.Load(),
			"deliveries of an entry delivered before: one per withheld ack, none of an entry a handler still had")
		assert.EqualValues(t, cfg.events, w.acks(), "one ack per entry")
	})
}

// An event's payload is its ID: encodeEvent and parseEvent agree, and a payload that is not
// one of the workload's canonical IDs is refused.
func TestEventPayload(t *testing.T) {
	for _, n := range []int{0, 7, 42, 1234567} {
		got, err := parseEvent(encodeEvent(n))
		require.NoError(t, err)
		assert.Equal(t, n, got)
	}
	for _, bad := range []string{"", "ev-", "ev-x", "ev--000001", "ev-42", "ev-00000042", "EV-0000042", `{"id":"ev-0000042","n":42}`} {
		_, err := parseEvent([]byte(bad))
		assert.Error(t, err, "payload %q", bad)
	}
}
