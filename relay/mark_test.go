package relay

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// markOf is the mark another process's store writes of commit c, carrying its entries
// when carry is set.
func markOf(c *wake.Committed, seq int64, carry bool) wake.Mark {
	m := wake.Mark{Seq: seq, ID: c.ExecutionID, Version: c.Version}
	if carry {
		m.Outbox = c.Outbox
	}
	return m
}

// A mark that carries its commit's entries is taken with no read once the relay knows the
// execution up to the version before; the execution's first commit, and a mark that
// carries nothing, are read. In virtual time.
func TestMarkCarryingEntriesIsTakenWithNoRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		c1 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.s.woken([]wake.Mark{b.mark(c1, 1, true)}, false)
		assert.Zero(t, b.held(), "the first commit is read: a new hold knows nothing")
		assert.Equal(t, []string{"S"}, b.read())
		b.settledAll()

		c2 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.s.woken([]wake.Mark{b.mark(c2, 2, true)}, false)
		assert.Nil(t, b.read(), "S is known up to c1: c2's entry is taken from its mark")
		b.settledAll()

		c3 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.s.woken([]wake.Mark{b.mark(c3, 3, false)}, false)
		assert.Zero(t, b.held(), "a mark that carries nothing owes a read")
		assert.Equal(t, []string{"S"}, b.read())
		b.settledAll()

		assert.Equal(t, []string{entryName(c1), entryName(c2), entryName(c3)}, b.handled())
		assert.EqualValues(t, 2, b.r.stats.targeted.Load())
		assert.EqualValues(t, 1, b.r.stats.handedOver.Load())
	})
}

// A scan cut by its limit that read a commit's entry hands it out without learning the
// execution; once the entry is acked and its record forgotten, the commit's mark, late,
// must not hand it out again: the version read decides. In virtual time.
func TestMarkOfACommitAScanReadIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} }, Options{Batch: 1})
		b.hold("S", b.lease())
		c1 := b.emit("S", "T", false) // handed over: S is known up to it
		b.settledAll()
		c2 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.scan() // returns c2's entry alone, its limit: cut, it teaches nothing of S
		b.settledAll()
		b.s.mu.Lock()
		known := b.s.holds[b.r.partOf("S")].sources.known["S"]
		b.s.mu.Unlock()
		require.EqualValues(t, 1, known, "the cut scan did not teach S's version")

		b.s.woken([]wake.Mark{b.mark(c2, 1, true)}, false)
		assert.Zero(t, b.held(), "c2's entry, acked, is not taken from its mark again")
		b.read()
		b.settledAll()
		assert.Equal(t, []string{entryName(c1), entryName(c2)}, b.handled(), "each entry once")
	})
}

// A mark's entries wait, as a scan's would, while their execution's earlier entry is held
// back for a retry: the mark owes a read, and the read delivers both in order. In virtual
// time.
func TestMarkIsNotTakenWhileItsExecutionWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		c1 := b.failOnce("S", "T")
		c2 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.s.woken([]wake.Mark{b.mark(c2, 1, true)}, false)
		assert.Zero(t, b.held(), "c2 is not taken ahead of c1")
		// The read after the back-off hands both out; their handlers may be done before held
		// is asked.
		settleUntil(t, func() bool { return len(b.read()) > 0 && (b.held() > 0 || len(b.handled()) == 3) },
			"the read after the back-off")
		b.settledAll()
		assert.Equal(t, []string{entryName(c1), entryName(c1), entryName(c2)}, b.handled())
	})
}

// A mark of a commit sent before the hold began (its generation older than the hold's)
// owes a read: the entries it carries may have been handed out and acked under an earlier
// hold, whose records the new hold does not have. Here the new hold's scan reads the
// execution's earlier entry, still pending after a failure, and knows it up to that version
// alone. In virtual time.
func TestMarkFromBeforeTheHoldIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} },
			Options{RetryMin: time.Second, RetryMax: time.Second})
		h1 := b.hold("S", b.lease())
		c1 := b.failOnce("S", "T1") // released: S/1 is pending, S soiled
		c2 := b.emit("S", "T2", false)
		stale := b.mark(c2, 1, true)              // written to the holder while the first hold held
		require.Equal(t, []string{"S"}, b.read()) // S/1 held back for its retry; S/2 handed out
		b.settledAll()
		require.Equal(t, []string{entryName(c1), entryName(c2)}, b.handled())

		b.s.mu.Lock()
		b.s.removeHold(h1, errors.New("lost"))
		b.s.mu.Unlock()
		b.hold("S", b.lease())
		time.Sleep(2 * time.Second) // S/1's retry is due
		b.scan()                    // reads S/1 alone: S/2 was acked
		b.settledAll()

		b.s.woken([]wake.Mark{stale}, false)
		assert.Zero(t, b.held(), "S/2, acked under the first hold, is not taken from a mark of before the second")
		b.read()
		b.settledAll()
		assert.Equal(t, 1, count(b.handled(), entryName(c2)), "S/2 handled once: %v", b.handled())
		assert.Equal(t, 2, count(b.handled(), entryName(c1)), "S/1 failed once, then handled: %v", b.handled())
	})
}

// A hand-over reads its commit's version as a scan does: once the execution is forgotten
// (a commit of it whose outcome is unknown) and a scan knows it again up to an earlier
// version only (its entry there still pending), the handed-over commit's mark, late, owes a
// read rather than handing its acked entry out again. In virtual time.
func TestMarkOfAHandedOverCommitIsNotTakenOnceForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		result, entered := b.gate("S/1")
		c1 := b.emit("S", "T1", false) // handed over: in its handler
		<-entered
		c2 := b.emit("S", "T2", false) // handed over, and acked
		settleUntil(t, func() bool { return b.held() == 1 }, "S/2 acked")
		b.s.End("S", b.s.Begin("S"), nil) // a commit of S whose outcome is unknown: S forgotten
		result <- errors.New("failed")    // S/1 released
		b.settledAll()
		time.Sleep(10 * time.Millisecond) // S/1's retry is due
		b.scan()                          // reads S/1 alone: S known up to version 1 again
		b.settledAll()

		b.s.woken([]wake.Mark{b.mark(c2, 1, true)}, false)
		assert.Zero(t, b.held(), "S/2, handed over and acked, is not taken from its mark")
		b.read()
		b.settledAll()
		assert.Equal(t, []string{entryName(c1), entryName(c2), entryName(c1)}, b.handled())
	})
}

// count is how many times s occurs in ss.
func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}
