package relay_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// simEventKind is what happened.
type simEventKind int

const (
	evCommit       simEventKind = iota // the engine committed: item (an entry) or timer op
	evStart                            // a handler started: actor, item, attempts
	evEnd                              // a handler returned: actor, item, err
	evAck                              // an ack took effect in the store: actor, item
	evFailed                           // a failure was recorded: item, attempts
	evDead                             // an item was moved to dead: item, attempts
	evRevive                           // an item was revived
	evToldDead                         // a relay's OnDead: actor, item
	evFailErr                          // a relay reported a failure record's error (OpFail): actor
	evHeld                             // a relay took a partition: actor, part
	evGaveUp                           // a relay gave a partition up: actor, part
	evRunEnd                           // a relay's Run returned: actor, err
	evFailCall                         // a failure record's answer, as its relay heard it: err, attempts (the fault)
	evCrash                            // a process crashed: actor, its relay incarnation
	evListDeadFail                     // a read of the dead list failed: actor, source
	evConflict                         // the engine's commit met a version conflict: source, attempts (its version)
	evSpin                             // a process read in a loop without time passing: actor, err
)

// simEvent is one entry of the history, at its virtual time.
type simEvent struct {
	at        time.Time
	kind      simEventKind
	actor     string // the relay incarnation (proc/kind#n), or "engine"
	item      string // outboxKey or timerKey
	target    string // an entry's target
	source    string // the execution holding the item
	seq       int64
	path      string
	fireAt    time.Time
	cancel    bool // a timer op that cancels
	part      int
	attempts  int
	permanent bool // a failure record's: the handler's error wraps ErrPermanent
	moved     bool // a failure record's answer (evFailCall): the write moved the item to dead
	err       error
	local     time.Time // a partition's: when its relay started or stopped handing its items out
}

// simHistory is the history of a run: every event, in the order it happened.
type simHistory struct {
	mu     sync.Mutex
	events []simEvent
}

func (h *simHistory) add(e simEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.at = time.Now()
	h.events = append(h.events, e)
}

func (h *simHistory) all() []simEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func outboxKey(source string, seq int64) string { return fmt.Sprintf("outbox %s/%d", source, seq) }

func timerKey(exe, path string, fireAt time.Time) string {
	return fmt.Sprintf("timer %s/%s@%d", exe, path, fireAt.UnixMilli())
}

func refKey(ref execstore.ItemRef) string {
	if ref.Kind == execstore.TimerItem {
		return timerKey(ref.ExecutionID, ref.Path, ref.FireAt)
	}
	return outboxKey(ref.ExecutionID, ref.Seq)
}

// simFinal is what the checker reads of the store once everything settled.
type simFinal struct {
	pending    []execstore.OutboxEntry
	dueTimers  []execstore.DueTimer
	dead       []execstore.DeadItem
	maxAtt     int
	deadOK     func(item string) bool // whether the item's handler may fail for good
	oddRuns    []error                // the Run results of the relays of another partition count
	lostLeases map[string]int64       // leases lost, by relay incarnation, when the plan promises none
}

// simCheck checks every promise of the package doc against the history, and returns what
// it found broken.
func simCheck(events []simEvent, fin simFinal) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	type entry struct {
		source, target string
		seq            int64
		committed      time.Time
	}
	entries := map[string]*entry{}
	var bySource = map[string][]*entry{}
	// timer ops by execution/path, in commit order
	type timerOp struct {
		at     time.Time
		fireAt time.Time
		cancel bool
	}
	timerOps := map[string][]timerOp{}
	acked := map[string]map[string]time.Time{} // item → actor → first ack
	ackedAny := map[string]time.Time{}
	nilEnds := map[string][]time.Time{}              // item → nil handler returns
	nilEndsBy := map[string]map[string][]time.Time{} // item → actor → nil returns
	type interval struct{ from, to time.Time }
	deadSpans := map[string][]interval{} // item → when it was dead (to zero: still)
	failErrs := map[string]bool{}        // actors that reported a failure record's error
	crashed := map[string]bool{}         // relay incarnations whose process crashed
	// The moves to dead, each by the relay whose failure record made it, and what it told.
	type move struct {
		item, actor, source string
		at                  time.Time // when the record was applied
		attempts            int
		heard               bool // the record was answered without an error
		told                bool // its relay's OnDead came
		revived             bool // revived since
	}
	var moves []*move
	lastMove := map[string]*move{}           // item → its last move, until revived
	untold := map[string]*move{}             // item and actor → its move awaiting OnDead
	unsure := map[string]bool{}              // item and actor → a failure record of it whose answer was lost
	lifeFails := map[string]int{}            // item → failures recorded since it was committed or revived
	buriedBy := map[string]map[string]bool{} // item → relays told it dead, since its last revive
	readFailed := map[string][]simEvent{}    // actor → its failed reads of the dead list
	holds := map[string]map[int][]interval{}
	open := map[string]map[int]time.Time{}
	runEnd := map[string]time.Time{}

	for _, e := range events {
		switch e.kind {
		case evCommit:
			if e.path == "" {
				en := &entry{source: e.source, target: e.target, seq: e.seq, committed: e.at}
				entries[e.item] = en
				bySource[e.source+"→"+e.target] = append(bySource[e.source+"→"+e.target], en)
			} else {
				k := e.source + "/" + e.path
				timerOps[k] = append(timerOps[k], timerOp{at: e.at, fireAt: e.fireAt, cancel: e.cancel})
				if tk := timerKey(e.source, e.path, e.fireAt); !e.cancel {
					// Armed anew at a fire time it died at before: a new timer, which fires.
					if sp := deadSpans[tk]; len(sp) > 0 && sp[len(sp)-1].to.IsZero() {
						sp[len(sp)-1].to = e.at
					}
					delete(buriedBy, tk)
				}
			}
		case evAck:
			if acked[e.item] == nil {
				acked[e.item] = map[string]time.Time{}
			}
			if _, ok := acked[e.item][e.actor]; !ok {
				acked[e.item][e.actor] = e.at
			}
			if _, ok := ackedAny[e.item]; !ok {
				ackedAny[e.item] = e.at
			}
			// An item is acked only after a handler of this relay returned nil for it.
			if !slices.ContainsFunc(nilEndsBy[e.item][e.actor], func(t time.Time) bool { return !t.After(e.at) }) {
				fail("%s acked by %s at %v before any handler of it returned nil", e.item, e.actor, e.at)
			}
		case evEnd:
			if e.err == nil {
				nilEnds[e.item] = append(nilEnds[e.item], e.at)
				if nilEndsBy[e.item] == nil {
					nilEndsBy[e.item] = map[string][]time.Time{}
				}
				nilEndsBy[e.item][e.actor] = append(nilEndsBy[e.item][e.actor], e.at)
			}
		case evDead, evFailed:
			// The store counts: at most MaxAttempts failures of an item are recorded, and the
			// MaxAttempts-th (or one wrapping ErrPermanent) moves it to dead in that write.
			if e.attempts == 1 {
				lifeFails[e.item] = 0 // a timer armed anew starts with no failure
			}
			if lifeFails[e.item]++; lifeFails[e.item] > fin.maxAtt {
				fail("%s: failure number %d recorded by %s at %v, MaxAttempts %d", e.item, lifeFails[e.item], e.actor, e.at, fin.maxAtt)
			}
			if e.attempts > fin.maxAtt {
				fail("%s recorded %d failed attempts by %s at %v, MaxAttempts %d", e.item, e.attempts, e.actor, e.at, fin.maxAtt)
			}
			if e.kind == evFailed {
				if e.attempts == fin.maxAtt {
					fail("%s recorded its %d-th failed attempt by %s at %v and left it pending, MaxAttempts %d", e.item, e.attempts, e.actor, e.at, fin.maxAtt)
				}
				break
			}
			if e.attempts != fin.maxAtt && !e.permanent {
				fail("%s moved to dead by %s at %v with %d attempts, not at MaxAttempts %d nor by ErrPermanent", e.item, e.actor, e.at, e.attempts, fin.maxAtt)
			}
			m := &move{item: e.item, actor: e.actor, source: e.source, at: e.at, attempts: e.attempts}
			moves = append(moves, m)
			lastMove[e.item] = m
			untold[e.item+"\x00"+e.actor] = m
			sp := deadSpans[e.item]
			if len(sp) == 0 || !sp[len(sp)-1].to.IsZero() {
				deadSpans[e.item] = append(sp, interval{from: e.at})
			}
		case evRevive:
			if sp := deadSpans[e.item]; len(sp) > 0 && sp[len(sp)-1].to.IsZero() {
				sp[len(sp)-1].to = e.at
			}
			if m := lastMove[e.item]; m != nil {
				m.revived = true
			}
			delete(lastMove, e.item)
			delete(buriedBy, e.item)
			lifeFails[e.item] = 0
		case evToldDead:
			// Told by the relay whose write moved it, with the attempts of that write.
			m := untold[e.item+"\x00"+e.actor]
			if m == nil {
				// A record whose answer was lost is read back from the dead list, which cannot
				// tell whose write moved the item: another relay's move is told again.
				if !unsure[e.item+"\x00"+e.actor] || lastMove[e.item] == nil {
					fail("%s told dead by %s at %v, though no write of its moved it to dead", e.item, e.actor, e.at)
				}
				delete(unsure, e.item+"\x00"+e.actor)
				break
			}
			delete(untold, e.item+"\x00"+e.actor)
			m.told = true
			if e.attempts != m.attempts {
				fail("%s told dead by %s at %v with %d attempts, moved with %d", e.item, e.actor, e.at, e.attempts, m.attempts)
			}
			if !m.revived { // a revive before the relay heard of the move made it pending again
				if buriedBy[e.item] == nil {
					buriedBy[e.item] = map[string]bool{}
				}
				buriedBy[e.item][e.actor] = true
			}
		case evFailErr:
			failErrs[e.actor] = true
		case evFailCall:
			if m := untold[e.item+"\x00"+e.actor]; e.moved && m != nil {
				m.heard = e.err == nil
			}
			if e.err != nil && !e.moved {
				unsure[e.item+"\x00"+e.actor] = true
			}
		case evStart:
			// Delivered no more, by the relay told it dead, until revived.
			if buriedBy[e.item][e.actor] {
				fail("%s handed out by %s at %v after that relay was told it dead", e.item, e.actor, e.at)
			}
		case evCrash:
			crashed[e.actor] = true
		case evListDeadFail:
			readFailed[e.actor] = append(readFailed[e.actor], e)
		case evHeld:
			if open[e.actor] == nil {
				open[e.actor] = map[int]time.Time{}
			}
			open[e.actor][e.part] = e.local
		case evGaveUp:
			if from, ok := open[e.actor][e.part]; ok {
				if holds[e.actor] == nil {
					holds[e.actor] = map[int][]interval{}
				}
				holds[e.actor][e.part] = append(holds[e.actor][e.part], interval{from, e.local})
				delete(open[e.actor], e.part)
			}
		case evRunEnd:
			runEnd[e.actor] = e.at
		case evSpin:
			fail("%v", e.err)
		}
	}
	for actor, parts := range open {
		for p, from := range parts {
			if holds[actor] == nil {
				holds[actor] = map[int][]interval{}
			}
			to, ok := runEnd[actor]
			if !ok {
				to = time.Unix(1<<40, 0)
			}
			holds[actor][p] = append(holds[actor][p], interval{from, to})
		}
	}
	deadAt := func(item string, from, to time.Time) bool {
		for _, sp := range deadSpans[item] {
			if !sp.from.After(to) && (sp.to.IsZero() || !sp.to.Before(from)) {
				return true
			}
		}
		return false
	}
	doneBy := func(item string, t time.Time) bool {
		if at, ok := ackedAny[item]; ok && !at.After(t) {
			return true
		}
		return slices.ContainsFunc(nilEnds[item], func(at time.Time) bool { return !at.After(t) })
	}

	// One holder per partition: the relays of a kind never hold one partition at once.
	kindOf := func(actor string) string { return actor[strings.Index(actor, "/")+1 : strings.Index(actor, "#")] }
	actors := make([]string, 0, len(holds))
	for a := range holds {
		actors = append(actors, a)
	}
	slices.Sort(actors)
	for i, a := range actors {
		for _, b := range actors[i+1:] {
			if kindOf(a) != kindOf(b) {
				continue
			}
			for p, as := range holds[a] {
				for _, x := range as {
					for _, y := range holds[b][p] {
						if x.from.Before(y.to) && y.from.Before(x.to) && !x.to.Before(x.from) && !y.to.Before(y.from) {
							fail("partition %d held by %s [%v, %v] and %s [%v, %v] at once", p, a, x.from, x.to, b, y.from, y.to)
						}
					}
				}
			}
		}
	}

	for _, e := range events {
		if e.kind != evStart {
			continue
		}
		// A handler starts only while its relay holds the item's partition.
		held := slices.IndexFunc(holds[e.actor][e.part], func(iv interval) bool { return !e.at.Before(iv.from) && !e.at.After(iv.to) })
		if held < 0 {
			fail("%s handed out by %s at %v outside its holds of partition %d", e.item, e.actor, e.at, e.part)
		}
		// Delivered no more once dead, until revived: no hold that began after the move hands
		// it out.
		if held >= 0 {
			from := holds[e.actor][e.part][held].from
			if slices.ContainsFunc(deadSpans[e.item], func(sp interval) bool {
				return sp.from.Before(from) && (sp.to.IsZero() || sp.to.After(e.at))
			}) {
				fail("%s handed out by %s at %v, in a hold of partition %d begun at %v after it was moved to dead", e.item, e.actor, e.at, e.part, from)
			}
		}
		// Never after the ack, by this relay.
		if at, ok := acked[e.item][e.actor]; ok && at.Before(e.at) {
			fail("%s handed out by %s at %v after its ack at %v", e.item, e.actor, e.at, at)
		}
		if e.path == "" {
			// Per source and target, in commit order: every earlier entry is done, or was
			// dead at some moment since this one was committed.
			en := entries[e.item]
			if en == nil {
				fail("%s handed out but never committed", e.item)
				continue
			}
			for _, prev := range bySource[en.source+"→"+en.target] {
				if prev.seq >= en.seq {
					break
				}
				pk := outboxKey(prev.source, prev.seq)
				if !doneBy(pk, e.at) && !deadAt(pk, en.committed, e.at) {
					fail("%s handed out by %s at %v ahead of %s, committed before it and not done", e.item, e.actor, e.at, pk)
				}
			}
			continue
		}
		// A timer cancelled or re-armed elsewhere before its fire time does not fire after.
		ops := timerOps[e.source+"/"+e.path]
		var last *timerOp
		for i := range ops {
			if ops[i].at.After(e.at) {
				break
			}
			last = &ops[i]
		}
		switch {
		case last == nil:
			fail("%s fired by %s at %v but never armed", e.item, e.actor, e.at)
		case (last.cancel || !last.fireAt.Equal(e.fireAt)) && last.at.Before(e.fireAt):
			fail("%s fired by %s at %v after a commit at %v (before its fire time) cancelled or re-armed it", e.item, e.actor, e.at, last.at)
		}
	}

	// Nothing lost: every entry is acked or dead, every timer's last arm fired or is dead.
	if len(fin.pending) > 0 {
		fail("%d entries still pending at the end, first %s", len(fin.pending), outboxKey(fin.pending[0].SourceID, fin.pending[0].Seq))
	}
	if len(fin.dueTimers) > 0 {
		fail("%d timers still due at the end, first %s", len(fin.dueTimers),
			timerKey(fin.dueTimers[0].ExecutionID, fin.dueTimers[0].Path, fin.dueTimers[0].FireAt))
	}
	deadNow := map[string]bool{}
	for _, d := range fin.dead {
		k := refKey(d.ItemRef)
		deadNow[k] = true
		if d.Count > fin.maxAtt {
			fail("%s dead with %d attempts, MaxAttempts %d", k, d.Count, fin.maxAtt)
		}
		if !fin.deadOK(k) {
			fail("%s is dead, though its handler fails fewer than MaxAttempts times", k)
		}
	}
	// Every move to dead is told by the relay whose write made it (OnDead), unless that relay
	// never heard that it took effect: the answer was lost and the read-back failed too, or
	// the process crashed, or the item was revived before the read-back.
	for _, m := range moves {
		excused := !m.heard && (crashed[m.actor] || m.revived || slices.ContainsFunc(readFailed[m.actor], func(r simEvent) bool {
			return r.source == m.source && !r.at.Before(m.at)
		}))
		if !m.told && !excused {
			fail("%s moved to dead by %s at %v with %d attempts and that relay never told OnDead, though it heard the move or could read it back", m.item, m.actor, m.at, m.attempts)
		}
	}
	// An item whose failures reached MaxAttempts, and not revived since, is dead at the end.
	for k, m := range lastMove {
		if !deadNow[k] {
			fail("%s moved to dead by %s at %v and not revived, but not dead at the end", k, m.actor, m.at)
		}
	}
	for k := range entries {
		if _, ok := ackedAny[k]; !ok && !deadNow[k] {
			fail("%s neither acked nor dead", k)
		}
	}
	for k, ops := range timerOps {
		last := ops[len(ops)-1]
		if last.cancel {
			continue
		}
		exe, path, _ := strings.Cut(k, "/")
		tk := timerKey(exe, path, last.fireAt)
		if deadNow[tk] {
			continue
		}
		if !slices.ContainsFunc(nilEnds[tk], func(at time.Time) bool { return !at.Before(last.at) }) {
			fail("%s armed at %v never fired after its arm (a re-arm lost?)", tk, last.at)
		}
		// Re-armed by its own handler to the same fire time: that handler's nil end is at the
		// re-arm's instant, so the re-arm must fire once more.
		if len(ops) >= 2 && !ops[len(ops)-2].cancel && ops[len(ops)-2].fireAt.Equal(last.fireAt) &&
			slices.ContainsFunc(nilEnds[tk], func(at time.Time) bool { return at.Equal(last.at) }) &&
			len(slices.DeleteFunc(slices.Clone(nilEnds[tk]), func(at time.Time) bool { return at.Before(last.at) })) < 2 {
			fail("%s re-armed by its handler at %v never fired again", tk, last.at)
		}
	}
	for _, err := range fin.oddRuns {
		if !isDisagree(err) {
			fail("a relay of another partition count ran: Run returned %v, want ErrPartitionsDisagree", err)
		}
	}
	for actor, n := range fin.lostLeases {
		if n > 0 {
			fail("%s lost %d leases though the lease server answered every call within its bound", actor, n)
		}
	}
	return bad
}

func isDisagree(err error) bool {
	return err != nil && strings.Contains(err.Error(), relay.ErrPartitionsDisagree.Error())
}
