package relay

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore"
)

// A poll that comes while no partition may be scanned (the lease's renewal is late) is not
// the last: once the lease is live again, the next poll scans, though nothing else wakes
// the dispatcher. e1, committed by another process meanwhile, is delivered. In virtual time.
func TestPollWhileTheLeaseIsNotLiveComesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 20 * time.Millisecond
		b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} },
			Options{PollInterval: poll})
		ls := b.lease()
		b.hold("S", ls)
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			b.s.dispatch(stop)
		}()
		t.Cleanup(func() { // before the harness stops (cleanups run last first)
			close(stop)
			<-stopped
		})
		settleUntil(t, func() bool { return b.r.stats.scans.Load() >= 1 }, "the first scan")

		pause(ls)
		scans := b.r.stats.scans.Load()
		time.Sleep(5 * poll) // polls come; none may scan
		assert.Equal(t, scans, b.r.stats.scans.Load(), "nothing scanned while the lease is not live")
		e1 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e1")}}})
		resume(ls)
		settleUntil(t, func() bool { return slices.Contains(b.handled(), entryName(e1)) },
			"e1 delivered by a poll after the lease is live again")
	})
}
