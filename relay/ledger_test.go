package relay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The ledger's verdicts on a scan's result, step by step: an item in flight is never
// admitted; an item whose ack was recorded after a scan began is not admitted by that scan;
// one acked before a scan began is (the store would not return it: admitting it is harmless
// and it shows nothing is remembered longer than needed); records are pruned once the scan
// that needed them is finished.
func TestLedger(t *testing.T) {
	type step struct {
		op   string // "scan" (start), "take", "ack", "bury", "release", "finish" (the last scan), "admit?", "buried?"
		item string
		want bool // for "admit?" and "buried?": the verdict for the last scan started
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"in flight is never admitted", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "finish"},
			{op: "scan"}, {op: "admit?", item: "a", want: false}, {op: "admit?", item: "b", want: true},
		}},
		{"acked during the scan is not admitted by it", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "finish"},
			{op: "scan"}, {op: "ack", item: "a"}, {op: "admit?", item: "a", want: false},
		}},
		{"acked after the scan's filtering, before the next scan", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "finish"},
			{op: "ack", item: "a"},
			{op: "scan"}, {op: "admit?", item: "a", want: true}, // began after the ack completed
		}},
		{"acked between two scans is pruned by the next scan's finish", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "finish"},
			{op: "scan"}, {op: "ack", item: "a"}, {op: "admit?", item: "a", want: false}, {op: "finish"},
			{op: "scan"}, {op: "admit?", item: "a", want: true},
		}},
		{"moved to dead during the scan is dropped by it, and buried: its execution waits", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "finish"},
			{op: "scan"}, {op: "bury", item: "a"}, {op: "admit?", item: "a", want: false}, {op: "buried?", item: "a", want: true},
			{op: "finish"},
			{op: "scan"}, {op: "admit?", item: "a", want: true}, {op: "buried?", item: "a", want: false}, // revived
		}},
		{"acked during the scan is not buried", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "ack", item: "a"}, {op: "buried?", item: "a", want: false},
		}},
		{"moved to dead before the scan began is not buried", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "bury", item: "a"},
			{op: "scan"}, {op: "buried?", item: "a", want: false}, {op: "admit?", item: "a", want: true},
		}},
		{"released is admitted again", []step{
			{op: "scan"}, {op: "take", item: "a"}, {op: "release", item: "a"}, {op: "admit?", item: "a", want: true},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLedger[string]()
			var n uint64
			for i, s := range c.steps {
				switch s.op {
				case "scan":
					n = l.startScan()
				case "take":
					l.take(s.item, &hold{})
				case "ack":
					l.ack(s.item)
				case "bury":
					l.bury(s.item)
				case "release":
					l.release(s.item)
				case "finish":
					l.finishScan(n)
				case "admit?":
					assert.Equal(t, s.want, l.admissible(s.item, n), "step %d", i)
				case "buried?":
					assert.Equal(t, s.want, l.buried(s.item, n), "step %d", i)
				}
			}
		})
	}
}

// finishScan forgets every ack no later scan needs.
func TestLedgerPrunes(t *testing.T) {
	l := newLedger[int]()
	n := l.startScan()
	for i := range 100 {
		l.take(i, &hold{})
	}
	for i := range 100 {
		l.ack(i)
	}
	assert.Zero(t, l.held())
	l.bury(100)
	assert.Len(t, l.acked, 101)
	l.finishScan(n)
	assert.Empty(t, l.acked)
	assert.Empty(t, l.dead)
}
