package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// hopLine is a "hop" line of chain c's hop k from entry source/seq, started at start ms, its
// commit returned at emitted ms (0: none emitted), ended at end ms.
func hopLine(c, k int, source string, seq int64, start, emitted, end int64, duplicate bool) deliveryLine {
	ms := int64(time.Millisecond)
	return deliveryLine{Kind: "hop", Chain: c, Hop: k, Source: source, Seq: seq, Start: start * ms, Emitted: emitted * ms,
		End: end * ms, Duplicate: duplicate}
}

// twoChains are the logs of two processes running chains 1 and 2 of 2 hops, each seeded at
// 100 ms: chain 1's hop 1 within process 0 (5 ms) and hop 2 across (1000 ms); chain 2's seed
// to process 1 (300 ms), hop 1 within it (10 ms) and hop 2 across (500 ms). Each chain's hop
// 1 is delivered again as a duplicate. Every entry is acked.
func twoChains() [][]deliveryLine {
	return [][]deliveryLine{
		{
			hopLine(1, 0, "a1", 1, 150, 160, 161, false),
			hopLine(1, 1, "b1", 2, 165, 170, 171, false),
			hopLine(1, 1, "b1", 2, 190, 0, 191, true),
			hopLine(2, 2, "a2", 6, 930, 0, 940, false),
			{Kind: "ack", Source: "a1", Seq: 1}, {Kind: "ack", Source: "b1", Seq: 2}, {Kind: "ack", Source: "a2", Seq: 6},
		},
		{
			hopLine(2, 0, "a2", 4, 400, 410, 411, false),
			hopLine(2, 1, "b2", 5, 420, 430, 431, false),
			hopLine(2, 1, "b2", 5, 440, 0, 441, true),
			hopLine(1, 2, "a1", 3, 1170, 0, 1180, false),
			{Kind: "ack", Source: "a2", Seq: 4}, {Kind: "ack", Source: "b2", Seq: 5}, {Kind: "ack", Source: "a1", Seq: 3},
		},
	}
}

var twoSeeds = map[int]int64{1: 100 * int64(time.Millisecond), 2: 100 * int64(time.Millisecond)}

// Each hop's latency runs from its emitter's commit returned to its first handler's start,
// split by whether the two processes differ; the seeds are apart, and a chain's time runs
// from hop 1 emitted to the end of its last hop's handler.
func TestMeasureChains(t *testing.T) {
	m := measureChains(twoChains(), twoSeeds, 2, 2)
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	assert.Equal(t, ms(5, 1000, 10, 500), m.hops, "chain 1's hops, then chain 2's")
	assert.Equal(t, ms(1000, 500), m.across)
	assert.Equal(t, ms(5, 10), m.within)
	assert.Equal(t, ms(50, 300), m.seeds)
	assert.Equal(t, ms(1180-160, 940-410), m.chainTimes)
	assert.Equal(t, 6, m.entries)
	assert.Equal(t, 8, m.handlerCalls)
	assert.Equal(t, 2, m.duplicates)
	assert.Zero(t, m.failed)

	// A hop whose emitter's line is missing is not measured; a duplicate is no emitter.
	logs := twoChains()
	logs[1] = logs[1][1:] // chain 2's seed handling
	m = measureChains(logs, twoSeeds, 2, 2)
	assert.Equal(t, ms(5, 1000, 500), m.hops)
	assert.Equal(t, ms(50), m.seeds)
	assert.Equal(t, ms(1180-160), m.chainTimes)

	// A failed call starts its hop's handling; its hop's next is timed from the call that
	// committed it.
	logs = twoChains()
	cancelled := hopLine(1, 2, "a1", 3, 1070, 0, 1075, false)
	cancelled.Failed = "context canceled"
	logs[0] = append(logs[0], cancelled)
	m = measureChains(logs, twoSeeds, 2, 2)
	assert.Equal(t, ms(5, 900, 10, 500), m.hops)
	assert.Equal(t, ms(5, 900, 10), m.within, "the failed call ran in the emitter's process")
	assert.Equal(t, ms(500), m.across)
	assert.Equal(t, 1, m.failed)
	assert.Equal(t, 2, m.duplicates)
}

// A run is done once every hop was handled, not as a duplicate, and every entry handed to a
// handler was acked.
func TestChainsDone(t *testing.T) {
	assert.True(t, chainsDone(twoChains(), 2, 2, -1))
	assert.False(t, chainsDone(twoChains(), 3, 2, -1), "chain 3 never ran")
	assert.False(t, chainsDone(twoChains(), 2, 3, -1), "no hop 3")

	logs := twoChains()
	logs[0] = logs[0][:len(logs[0])-1] // a2/6's ack
	assert.False(t, chainsDone(logs, 2, 2, -1))

	logs = twoChains()
	logs[0][3].Duplicate = true // chain 2's last hop found processed: the checks' to judge
	assert.True(t, chainsDone(logs, 2, 2, -1))

	logs = twoChains()
	logs[0][3].Failed = "context canceled" // chain 2's last hop failed: delivered again later
	assert.False(t, chainsDone(logs, 2, 2, -1))
}

// The checks pass on a run whose hops were each handled once, in order, the withheld ones
// again as duplicates, with the snapshots holding each execution's hops in order; and fail
// on a hop missing, a hop handled twice or from two entries, a withheld hop not seen again,
// hops out of order, a snapshot out of order, an outbox left pending and a process that did
// not stop cleanly.
func TestChainChecks(t *testing.T) {
	stored := map[int][2][]int{1: {{1}, {0, 2}}, 2: {{1}, {0, 2}}}
	for _, c := range chainChecks(twoChains(), stored, 2, 2, nil, noKill, nil, nil) {
		assert.True(t, c.ok, "%s: %s", c.name, c.detail)
	}

	logs := twoChains()
	logs[0][3] = hopLine(1, 0, "a1", 7, 155, 158, 159, false) // chain 2's hop 2 missing; chain 1's seed handled twice, from two entries
	logs[1][2].Duplicate = false                              // chain 2's hop 1 handled twice, and never seen as a duplicate
	logs[1][3].Start = 100 * int64(time.Millisecond)          // chain 1's hop 2 before its hop 1
	bad := map[int][2][]int{1: {{1}, {0, 2}}, 2: {{1}, {2, 0}}}
	pending := []execstore.OutboxEntry{{SourceID: "a2", Seq: 6}}
	failed := map[string]string{}
	for _, c := range chainChecks(logs, bad, 2, 2, pending, noKill, errors.New("not within 1m0s"), errors.New("exit 1")) {
		if !c.ok {
			failed[c.name] = c.detail
		}
	}
	assert.Equal(t, "1 entries pending (not within 1m0s)", failed["outbox empty at the end"])
	assert.Equal(t, "1: chain 2 hop 2", failed["every hop handled"])
	assert.Equal(t, "2: chain 1 hop 0 (2 handlings, 2 entries); chain 2 hop 1 (2 handlings, 1 entries)",
		failed["no hop handled or emitted twice"])
	assert.Equal(t, "1: chain 2 hop 1", failed["each withheld hop delivered again and found processed"])
	assert.Equal(t, "2: chain 1 hop 2 started before hop 1; chain 2's b holds hops [2 0], not [0 2]",
		failed["each chain's hops handled in order"])
	assert.Equal(t, "exit 1", failed["relay processes stopped cleanly"])
	assert.Len(t, failed, 6)

	// A hop committed that every call found processed was committed by a handler told
	// otherwise, unless a call failed, not knowing what its commit did.
	logs = twoChains()
	logs[1][3].Duplicate, logs[1][3].Refused = true, "conflict"
	failed = map[string]string{}
	for _, c := range chainChecks(logs, stored, 2, 2, nil, noKill, nil, nil) {
		if !c.ok {
			failed[c.name] = c.detail
		}
	}
	assert.Equal(t, map[string]string{"every hop committed seen committed, or its handler failed": `1: chain 1 hop 2 (every call found it processed, a commit told "conflict")`}, failed)
	cancelled := hopLine(1, 2, "a1", 3, 1160, 0, 1165, false)
	cancelled.Failed = "context canceled"
	logs[0] = append(logs[0], cancelled)
	for _, c := range chainChecks(logs, stored, 2, 2, nil, noKill, nil, nil) {
		assert.True(t, c.ok, "%s: %s", c.name, c.detail)
	}
	// A hop whose every call failed was not handled.
	logs = twoChains()
	logs[1][3].Failed = "context canceled"
	for _, c := range chainChecks(logs, stored, 2, 2, nil, noKill, nil, nil) {
		if c.name == "every hop handled" {
			assert.Equal(t, "1: chain 1 hop 2", c.detail)
		}
	}
}

// The pairs are drawn from the seed: the same each time, others with another seed, and
// every id distinct. Placed, each b is in its a's partition, and begins with the b it would
// be spread.
func TestChainPairs(t *testing.T) {
	pairs := func(seed uint64, placed bool) [][2]string {
		p, err := chainPairs(seed, 16, placed, 64)
		require.NoError(t, err)
		return p
	}
	p := pairs(1, false)
	require.Len(t, p, 17)
	assert.Equal(t, p, pairs(1, false))
	assert.NotEqual(t, p, pairs(2, false))
	seen := map[string]bool{}
	for _, pair := range p[1:] {
		for _, id := range pair {
			assert.False(t, seen[id], id)
			seen[id] = true
		}
	}
	assert.Regexp(t, `^chain3-a-[0-9a-f]{8}$`, p[3][0])
	assert.Regexp(t, `^chain3-b-[0-9a-f]{8}$`, p[3][1])
	placed := pairs(1, true)
	for c := 1; c <= 16; c++ {
		assert.Equal(t, p[c][0], placed[c][0])
		assert.True(t, strings.HasPrefix(placed[c][1], p[c][1]), "%s begins with %s", placed[c][1], p[c][1])
		assert.Equal(t, execstore.PartitionOf(placed[c][0], 64), execstore.PartitionOf(placed[c][1], 64), "chain %d", c)
	}
}

// The chain's handler commits the hop to its target with the next hop to the entry's
// source, finds a redelivered event processed and commits nothing, emits nothing at the
// last hop, withholds the ack of the first handling of the hop before the last, and logs
// each call, a failed one with its error.
func TestChainHandler(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	for _, id := range []string{"x", "y"} {
		_, err := store.Commit(ctx, &execstore.Execution{ID: id, Status: execstore.Running, Data: []byte(`{"hops":[]}`)}, execstore.Commit{})
		require.NoError(t, err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "r1.log"))
	require.NoError(t, err)
	defer f.Close()
	handle := chainHandler(store, lineLog{f})
	entry := func(source, target string, hop int) execstore.OutboxEntry {
		return execstore.OutboxEntry{SourceID: source, Seq: int64(10 + hop), TargetID: target,
			Event: chainEventBytes(chainEvent{Chain: 1, Hop: hop, Of: 3})}
	}

	require.NoError(t, handle(ctx, entry("x", "y", 1)))
	require.NoError(t, handle(ctx, entry("x", "y", 1)), "delivered again")
	pending, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	require.Len(t, pending, 1, "one next hop, however many deliveries")
	assert.Equal(t, "x", pending[0].TargetID)
	var next chainEvent
	require.NoError(t, json.Unmarshal(pending[0].Event, &next))
	assert.Equal(t, chainEvent{Chain: 1, Hop: 2, Of: 3}, next)
	require.NoError(t, store.AckOutbox(ctx, pending[0].SourceID, pending[0].Seq))

	require.ErrorIs(t, handle(ctx, entry("y", "x", 2)), relay.ErrLeavePending, "hop Of-1's first handling")
	require.NoError(t, handle(ctx, entry("y", "x", 2)))
	require.NoError(t, handle(ctx, entry("x", "y", 3)))
	require.ErrorIs(t, handle(ctx, entry("x", "nowhere", 3)), relay.ErrPermanent)

	for id, want := range map[string][]int{"x": {2}, "y": {1, 3}} {
		exe, err := store.Load(ctx, id)
		require.NoError(t, err)
		var s chainSnapshot
		require.NoError(t, json.Unmarshal(exe.Data, &s))
		assert.Equal(t, want, s.Hops, id)
	}
	pending, err = store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	require.Len(t, pending, 1, "hop 3, the last, emitted nothing")

	c := &relayChild{name: "r1", log: f.Name()}
	lines, err := c.lines()
	require.NoError(t, err)
	require.Len(t, lines, 6)
	type seen struct {
		hop                        int
		emitted, duplicate, failed bool
	}
	var got []seen
	for _, l := range lines {
		assert.Equal(t, "hop", l.Kind)
		assert.LessOrEqual(t, l.Start, l.End)
		got = append(got, seen{l.Hop, l.Emitted > 0, l.Duplicate, l.Failed != ""})
	}
	assert.Equal(t, []seen{{1, true, false, false}, {1, false, true, false}, {2, true, false, false}, {2, false, true, false},
		{3, false, false, false}, {3, false, false, true}}, got)
}

// In a run with faults, the killed process's handlings need no logged ack (it may have died
// between an ack and its line: the outbox, read at the end, says the rest); a hop it
// committed unlogged is found processed by every later call; an earlier hop delivered again
// after its successor is no disorder; and the faults must come mid-chain.
func TestChainChecksWithFaults(t *testing.T) {
	stored := map[int][2][]int{1: {{1}, {0, 2}}, 2: {{1}, {0, 2}}}
	ms := int64(time.Millisecond)

	// Process 1 (the victim) handled chain 2's hops 0 and 1 and died before their acks' lines.
	logs := twoChains()
	logs[1] = slices.DeleteFunc(logs[1], func(x deliveryLine) bool { return x.Kind == "ack" && x.Source != "a1" })
	assert.False(t, chainsDone(logs, 2, 2, -1))
	assert.True(t, chainsDone(logs, 2, 2, 1))

	// Chain 1's hop 2 was committed by the victim, which died before its line (at 1175 ms);
	// process 0 found it processed when it delivered it again.
	logs = twoChains()
	logs[1][3] = hopLine(1, 2, "a1", 3, 1190, 0, 1191, true)
	kill := chainKill{proc: 1, at: 1175 * ms, joiner: -1}
	for _, c := range chainChecks(logs, stored, 2, 2, nil, kill, nil, nil) {
		assert.True(t, c.ok, "%s: %s", c.name, c.detail)
	}
	kill.at = 1195 * ms // a call that began before the kill found it processed: none committed it
	failed := map[string]string{}
	for _, c := range chainChecks(logs, stored, 2, 2, nil, kill, nil, nil) {
		if !c.ok {
			failed[c.name] = c.detail
		}
	}
	assert.Equal(t, map[string]string{"every hop committed seen committed, or its handler failed": "1: chain 1 hop 2 (every call found it processed)"}, failed)

	// Chain 1's hop 1 delivered again, after its hop 2 began: hop 2 began after the call that
	// committed hop 1.
	logs = twoChains()
	logs[1] = append(logs[1], hopLine(1, 1, "b1", 2, 1300, 0, 1301, true))
	for _, c := range chainChecks(logs, stored, 2, 2, nil, noKill, nil, nil) {
		assert.True(t, c.ok, "%s: %s", c.name, c.detail)
	}

	// The faults came mid-chain: process 2 joined, took partition 5, which process 0 had
	// handed over, at 500 ms, and committed chain 2's hop 2 at 1200 ms; process 1, killed at
	// 1175 ms, had committed chain 2's hop 1.
	joined := append(twoChains(), []deliveryLine{{Kind: "took", Seq: 5, End: 500 * ms}, hopLine(2, 2, "a2", 6, 1200, 0, 1210, false)})
	joined[0] = append([]deliveryLine{{Kind: "released", Seq: 5, End: 400 * ms}}, joined[0]...)
	joined[0][4] = hopLine(2, 2, "a2", 6, 1200, 0, 1210, true) // found processed after the joiner's
	kill = chainKill{proc: 1, at: 1175 * ms, joiner: 2}
	by := chainHandlings(joined)
	assert.True(t, faultsMidChain(joined, by, kill).ok, faultsMidChain(joined, by, kill).detail)
	early := chainKill{proc: 1, at: 1250 * ms, joiner: 2} // every hop of chain 2 began before the kill
	assert.Equal(t, "joining process took a partition handed over before the last hop: true; a chain of the killed process went on elsewhere: false",
		faultsMidChain(joined, by, early).detail)
	late := slices.Clone(joined)
	late[2] = slices.Clone(late[2])
	late[2][0].End = 1300 * ms // after every hop began
	assert.Equal(t, "joining process took a partition handed over before the last hop: false; a chain of the killed process went on elsewhere: true",
		faultsMidChain(late, chainHandlings(late), kill).detail)
	joined[0][0].Kind = "stopping" // released at the stop: no hand-over
	assert.False(t, faultsMidChain(joined, chainHandlings(joined), kill).ok)
}

// The chains of a run with faults are as many times longer as make those without last
// faultChainSpan, from once to maxFaultHopsFactor times.
func TestFaultHops(t *testing.T) {
	assert.Equal(t, 40, faultHops(10, 0), "none measured")
	assert.Equal(t, 40, faultHops(10, 200*time.Millisecond), "at most 4 times")
	assert.Equal(t, 30, faultHops(10, 500*time.Millisecond))
	assert.Equal(t, 20, faultHops(10, 1499*time.Millisecond/2+time.Millisecond))
	assert.Equal(t, 10, faultHops(10, 4*time.Second), "at least once")
	rep := &chainReport{runs: []chainRun{
		{processes: 4, placed: true, measure: chainMeasure{chainTimes: millisecondsOf(100, 300)}},
		{processes: 4, measure: chainMeasure{chainTimes: millisecondsOf(1000)}},
		{processes: 4, faults: true, measure: chainMeasure{chainTimes: millisecondsOf(9000)}},
	}}
	assert.Equal(t, 200*time.Millisecond, rep.chainMean(4, true))
	assert.Equal(t, time.Second, rep.chainMean(4, false))
	assert.Zero(t, rep.chainMean(2, false))
}

// The victim is the process with the most chains under way, not the joiner, of two the one
// that began such a hop the latest; none when every chain is done.
func TestChainVictim(t *testing.T) {
	logs := [][]deliveryLine{
		{hopLine(1, 0, "a1", 1, 100, 101, 102, false), hopLine(2, 2, "a2", 6, 300, 0, 301, false)}, // chain 2 done
		{hopLine(1, 1, "b1", 2, 110, 111, 112, false), hopLine(3, 0, "a3", 7, 120, 121, 122, false)},
		{hopLine(3, 1, "b3", 8, 130, 131, 132, false), hopLine(4, 0, "a4", 9, 140, 141, 142, false)},
		{hopLine(5, 0, "a5", 10, 500, 501, 502, false), hopLine(6, 0, "a6", 11, 510, 511, 512, false), hopLine(7, 0, "a7", 12, 520, 521, 522, false)},
	}
	assert.Equal(t, 2, chainVictim(logs, 2, 3), "processes 1 and 2 run two chains each; 2 began one the latest; 3 joined")
	assert.Equal(t, 3, chainVictim(logs, 2, -1), "three chains")
	logs[2][1].Duplicate = true
	assert.Equal(t, 1, chainVictim(logs, 2, 3), "a duplicate is no hop committed")
	assert.Equal(t, -1, chainVictim([][]deliveryLine{{hopLine(1, 2, "a1", 1, 100, 0, 101, false)}}, 2, -1), "every chain done")
}

// The relays' Stats in a chain row are each process's last "stats" line, summed.
func TestLastStatsSum(t *testing.T) {
	logs := [][]deliveryLine{
		{{Kind: "stats", HandedOver: 1, Targeted: 9, Woken: 9}, {Kind: "deliver"}, {Kind: "stats", HandedOver: 5, Targeted: 2, Woken: 3}, {Kind: "deliver"}},
		{{Kind: "stats", HandedOver: 7, Targeted: 1, Woken: 1}},
		{{Kind: "deliver"}},
	}
	sum := lastStatsSum(logs)
	assert.Equal(t, [3]int64{12, 3, 4}, [3]int64{sum.HandedOver, sum.Targeted, sum.Woken})
}
