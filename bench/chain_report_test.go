package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// millisecondsOf returns each of v as that many milliseconds.
func millisecondsOf(v ...float64) []time.Duration {
	var out []time.Duration
	for _, x := range v {
		out = append(out, time.Duration(x*float64(time.Millisecond)))
	}
	return out
}

// A chain row gives the hops' percentiles by nearest rank, the medians of the hops across
// and within processes ("-" where there were none), the chains' mean and longest time, and
// the commands per event delivered; its failed checks fail the run.
func TestChainReport(t *testing.T) {
	cost := deliveryCost{storeCommands: commandCounts{"find": 300, "update": 100}, leaseCommands: commandCounts{"update": 40},
		commandsComplete: true}
	// 1…10 ms within the process, then 100…1000 ms across: 20 hops.
	within := millisecondsOf(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	across := millisecondsOf(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)
	rep := &chainReport{chains: 2, hops: 10, server: "s", runs: []chainRun{
		{processes: 1, hops: 10, cost: cost, wall: 2 * time.Second, checks: []check{{name: "every hop handled", ok: true}},
			measure: chainMeasure{hops: within, within: within, seeds: millisecondsOf(0.25, 900),
				chainTimes: millisecondsOf(100, 300), entries: 22, handlerCalls: 24, duplicates: 2}},
		{processes: 2, hops: 10, cost: deliveryCost{storeCommands: commandCounts{"find": 1}}, wall: 6 * time.Second,
			checks: []check{{name: "every hop handled", detail: "1: chain 2 hop 4"}},
			measure: chainMeasure{hops: append(append([]time.Duration{}, across...), within...), across: across, within: within,
				seeds: millisecondsOf(400), chainTimes: millisecondsOf(5000), entries: 22, handlerCalls: 25, duplicates: 2, failed: 1}},
		{processes: 4, placed: true, faults: true, hops: 40, checks: []check{{name: "the join and the kill came mid-chain", detail: "joining process took a partition handed over before the last hop: false"}},
			measure: chainMeasure{hops: within, within: within, seeds: millisecondsOf(1), entries: 82, handlerCalls: 84, duplicates: 2}},
	}}

	rows := rep.rows()
	require.Len(t, rows, 3)
	one, two, faults := rows[0], rows[1], rows[2]
	assert.Equal(t, 10, one.Hops)
	assert.False(t, one.Faults)
	assert.Equal(t, 40, faults.Hops, "the run's own hops")
	assert.True(t, faults.Faults)
	assert.Equal(t, workloadDeliveryChain, one.Workload)
	assert.Equal(t, 10, one.HopsMeasured)
	assert.InDelta(t, 5.0, one.HopP50Ms, 1e-9, "rank 5 of 10")
	assert.InDelta(t, 9.0, one.HopP90Ms, 1e-9, "rank 9 of 10")
	assert.InDelta(t, 10.0, one.HopP99Ms, 1e-9, "rank 10 of 10")
	assert.InDelta(t, 10.0, one.HopMaxMs, 1e-9)
	assert.Zero(t, one.AcrossProcesses)
	assert.Nil(t, one.AcrossP50Ms, "no hop crossed processes")
	require.NotNil(t, one.WithinP50Ms)
	assert.InDelta(t, 5.0, *one.WithinP50Ms, 1e-9)
	assert.InDelta(t, 0.25, one.SeedP50Ms, 1e-9, "rank 1 of 2")
	assert.InDelta(t, 0.2, one.ChainMeanS, 1e-9)
	assert.InDelta(t, 0.3, one.ChainMaxS, 1e-9)
	require.NotNil(t, one.CommandsPerEvent)
	assert.InDelta(t, 20.0, *one.CommandsPerEvent, 1e-9, "(300+100+40)/22")
	assert.Equal(t, 1000.0, one.PollIntervalMs)
	assert.True(t, one.ChecksPassed)

	assert.Equal(t, 1, two.FailedCalls)
	assert.Equal(t, 20, two.HopsMeasured)
	assert.InDelta(t, 10.0, two.HopP50Ms, 1e-9, "rank 10 of 20: the slowest hop within")
	assert.InDelta(t, 800.0, two.HopP90Ms, 1e-9, "rank 18 of 20")
	assert.InDelta(t, 1000.0, two.HopP99Ms, 1e-9, "rank 20 of 20")
	assert.Equal(t, 10, two.AcrossProcesses)
	require.NotNil(t, two.AcrossP50Ms)
	assert.InDelta(t, 500.0, *two.AcrossP50Ms, 1e-9)
	assert.Nil(t, two.CommandsPerEvent, "a process reported no commands")
	assert.False(t, two.ChecksPassed)
	assert.Equal(t, []string{"every hop handled: 1: chain 2 hop 4"}, two.FailedChecks)

	var out bytes.Buffer
	rep.writeTable(&out)
	text := out.String()
	assert.Contains(t, text, "chains: 2 pairs of executions, each passing an event back and forth 10 hops after a seed")
	assert.Contains(t, text, "PollInterval 1s")
	assert.Contains(t, text, "seeds (the bench's commits, not hops) to their first handler, p50 ms: 0.250 / 400.0")
	assert.Contains(t, text, "over the 22 events delivered")
	assert.Contains(t, text, "each chain's last hop but one delivered again on purpose")
	assert.Regexp(t, `\n\s+4\+1-1\s+placed\s+10\s`, text, "the faults' row")
	assert.Contains(t, text, "4+1-1: by 4 relay processes, the chains up to 4 times longer")
	assert.Contains(t, text, "partial")
	assert.Contains(t, text, "20.00")
	assert.Contains(t, text, "handler calls that failed (a lost lease cancels its handlers' context), delivered again: 0 / 1")

	writeChecks(&out, rep.checked())
	assert.Equal(t, 1, writeVerdict(&out, rep.checked(), nil, nil), "the failed checks fail the run")
	assert.Contains(t, out.String(), "delivery chains: 1 of 3 rows passed every check")
	assert.Contains(t, out.String(), "chains ×2, spread: every hop handled: 1: chain 2 hop 4")
	assert.Contains(t, out.String(), "chains ×4+1-1, placed: the join and the kill came mid-chain: joining process took a partition handed over before the last hop: false")

	b, err := json.Marshal(rep.jsonRows())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"workload":"delivery-chain"`)
	assert.Contains(t, string(b), `"hop_p90_ms":800`)
	assert.Contains(t, string(b), `"faults":true`)

	var none *chainReport
	assert.Empty(t, none.rows())
	assert.Empty(t, none.checked())
	assert.Empty(t, none.jsonRows())
	out.Reset()
	none.writeTable(&out)
	assert.Empty(t, out.String())
}

// The delivery section carries the chains: their table after the backlog's, their rows in
// the JSON and their checks in the verdict; with no backlog run there are no goals.
func TestDeliveryReportWithChains(t *testing.T) {
	chains := &chainReport{chains: 1, hops: 1, server: "s", runs: []chainRun{
		{processes: 1, checks: []check{{name: "every hop handled", ok: true}}, measure: chainMeasure{hops: millisecondsOf(1), within: millisecondsOf(1)}}}}
	rep := &deliveryReport{wait: deliveryWait, server: "s", chain: chains}
	assert.Empty(t, rep.goals(), "no backlog run: nothing to judge")
	var out bytes.Buffer
	rep.writeTable(&out)
	rep.writeGoals(&out)
	assert.Contains(t, out.String(), "chains: 1 pairs")
	assert.NotContains(t, out.String(), "goals of the delivery's scaling")
	require.Len(t, rep.jsonRows(), 1)
	checked := rep.checked()
	require.Len(t, checked, 1)
	assert.Equal(t, "delivery chains", checked[0].workload)

	rep.runs = []deliveryRun{{processes: 1, entries: 10, rate: 100, checks: []check{{name: "outbox empty at the end", ok: true}}}}
	out.Reset()
	rep.writeTable(&out)
	text := out.String()
	assert.Less(t, bytes.Index([]byte(text), []byte("delivery: 10 outbox entries")), bytes.Index([]byte(text), []byte("chains: 1 pairs")))
	assert.Len(t, rep.checked(), 2)
	assert.Len(t, rep.goals(), 3)
}
