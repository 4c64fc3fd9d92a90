package relay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/relay"
)

// handOff is a relay over a memstore whose commits the test hands over itself: the relay
// meets the store on a signal of the test's, on which the test calls Begin and End at the
// points it chooses. Scans can be held between their read and their answer.
type handOff struct {
	t     *testing.T
	sig   *wake.Signal
	probe *probe
	em    *emitter
	r     *relay.Relay
	// order is every handler call, as "source/seq".
	mu    sync.Mutex
	order []string
	// gate, when set, holds the next scan after its read until it is closed; read is closed
	// once that scan read the store.
	gate, read chan struct{}
	armed      atomic.Bool
}

func newHandOff(t *testing.T) *handOff {
	store := newMemstore(t)
	h := &handOff{t: t, sig: wake.For(fmt.Sprintf("relay-test:%p", t)), em: newEmitter(t, store)}
	h.probe = newProbe(t, store, nil)
	wake.Unregister(h.probe)
	wake.Register(h.probe, h.sig)
	t.Cleanup(func() { wake.Unregister(h.probe) })
	h.probe.afterScan = func() {
		if h.armed.CompareAndSwap(true, false) {
			close(h.read)
			<-h.gate
		}
	}
	h.r = relay.New(h.probe, func(_ context.Context, e execstore.OutboxEntry) error {
		h.mu.Lock()
		h.order = append(h.order, entryID(e.SourceID, e.Seq))
		h.mu.Unlock()
		return nil
	}, relay.Options{PollInterval: time.Hour, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	stop := run(t, h.r)
	t.Cleanup(func() { require.NoError(t, stop()) })
	settleUntil(t, func() bool { return h.r.Stats().Scans >= 1 }, "the first scan")
	return h
}

// holdNextScan makes the next scan wait after its read until release is called.
func (h *handOff) holdNextScan() (read <-chan struct{}, release func()) {
	h.gate, h.read = make(chan struct{}), make(chan struct{})
	h.armed.Store(true)
	return h.read, func() { close(h.gate) }
}

// askScan makes the relay scan: a commit whose outcome is unknown leaves it in doubt.
func (h *handOff) askScan() {
	h.sig.Begin("somebody-else").End(nil)
}

// commit commits one entry from source and returns what the store wrote, to be handed over.
func (h *handOff) commit(source, event string) *wake.Committed {
	seq := h.em.emit(source, "target-of-"+source, event)
	exe := h.em.exes[source]
	return &wake.Committed{ExecutionID: source, Version: exe.Version, Outbox: []execstore.OutboxEntry{
		{Seq: seq, SourceID: source, Version: exe.Version, TargetID: "target-of-" + source, Event: []byte(event)}}}
}

func (h *handOff) delivered() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

// A scan that read an entry before its commit was handed over, and answers after the
// handed-over entry was delivered and acked, hands nothing out: never after the ack.
// In virtual time.
func TestHandOffBeatsALateScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandOff(t)
		f := h.sig.Begin("s")
		c := h.commit("s", "e1")
		read, release := h.holdNextScan()
		h.askScan()
		<-read // the scan read e1
		f.End(c)
		settleUntil(t, func() bool { return h.r.Stats().Acked == 1 }, "the handed-over entry acked")
		skipped := h.r.Stats().Skipped
		release()
		settleUntil(t, func() bool { return h.r.Stats().Skipped == skipped+1 }, "the late scan skipped it")
		h.askScan()
		settleUntil(t, func() bool { return h.r.Stats().Scans >= 3 }, "one more scan")
		assert.Equal(t, []string{entryID("s", c.Outbox[0].Seq)}, h.delivered(), "delivered once")
		assert.EqualValues(t, 1, h.r.Stats().HandedOver)
	})
}

// A scan that answers while a commit of the source is in flight hands out what the commit
// wrote; the commit's hand-over, once the entry was acked, does not hand it out again.
// In virtual time.
func TestHandOverSkipsWhatAScanAckedWhileTheCommitWasInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandOff(t)
		f := h.sig.Begin("s")
		c := h.commit("s", "e1")
		h.askScan()
		settleUntil(t, func() bool { return h.r.Stats().Acked == 1 }, "the scan's entry acked")
		f.End(c)
		h.askScan()
		settleUntil(t, func() bool { return h.r.Stats().Scans >= 3 }, "one more scan")
		assert.Equal(t, []string{entryID("s", c.Outbox[0].Seq)}, h.delivered(), "delivered once")
		assert.Zero(t, h.r.Stats().HandedOver)

		// The source is known now: its next commit is handed over.
		g := h.sig.Begin("s")
		c2 := h.commit("s", "e2")
		g.End(c2)
		settleUntil(t, func() bool { return h.r.Stats().Acked == 2 }, "the second delivered")
		assert.EqualValues(t, 1, h.r.Stats().HandedOver)
	})
}

// A commit whose outcome was unknown leaves the source in doubt: its next commit is not
// handed over, so that it cannot overtake the earlier entry, which a scan finds. Both come
// in commit order. In virtual time.
func TestHandOffWaitsForAnEarlierEntryInTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandOff(t)
		f := h.sig.Begin("s")
		c1 := h.commit("s", "e1")
		read, release := h.holdNextScan()
		f.End(nil) // as if the commit's answer were lost: the relay scans
		<-read     // that scan read e1
		g := h.sig.Begin("s")
		c2 := h.commit("s", "e2")
		g.End(c2) // not handed over: e1 is not known to be delivered
		release()
		settleUntil(t, func() bool { return h.r.Stats().Acked == 2 }, "both delivered")
		assert.Equal(t, []string{entryID("s", c1.Outbox[0].Seq), entryID("s", c2.Outbox[0].Seq)}, h.delivered())
		assert.Zero(t, h.r.Stats().HandedOver)

		// Now the source is known: its next commit is handed over, without a scan.
		scans := h.r.Stats().Scans
		k := h.sig.Begin("s")
		c3 := h.commit("s", "e3")
		k.End(c3)
		settleUntil(t, func() bool { return h.r.Stats().Acked == 3 }, "the third delivered")
		assert.EqualValues(t, 1, h.r.Stats().HandedOver)
		assert.Equal(t, scans, h.r.Stats().Scans, "no scan")
	})
}
