package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// The delivery section reports events/s by processes with the ratios to 1 process, judges
// the scaling goals without deciding PASS/FAIL, and counts its failed checks in the verdict.
func TestDeliveryReport(t *testing.T) {
	ok := []check{{name: "outbox empty at the end", ok: true}}
	rep := &deliveryReport{entries: 300, wait: deliveryWait, server: "s", runs: []deliveryRun{
		{processes: 1, entries: 300, rate: 112.5, wall: time.Second, checks: ok},
		{processes: 2, entries: 300, rate: 225, wall: time.Second, checks: ok},
		{processes: 4, entries: 300, rate: 225, wall: time.Second, checks: ok},
	}, takeOver: &deliveryRun{processes: 2, entries: 300, rate: 100, takeOver: 2 * time.Second,
		checks: []check{{name: "every entry delivered at least once", detail: "1 of 300 never handed to a handler"}}}}

	rows := rep.rows()
	require.Len(t, rows, 4)
	assert.Nil(t, rows[0].RatioToOne)
	require.NotNil(t, rows[1].RatioToOne)
	assert.InDelta(t, 2.0, *rows[1].RatioToOne, 1e-9)
	assert.Equal(t, "lanes", rows[0].Limit, "112.5/s of 125/s")
	assert.Equal(t, "server", rows[2].Limit, "225/s of 500/s")
	require.NotNil(t, rows[3].TakeOverS)
	assert.InDelta(t, 2.0, *rows[3].TakeOverS, 1e-9)

	goals := rep.goals()
	require.Len(t, goals, 3)
	assert.True(t, *goals[0].Met)
	assert.False(t, *goals[1].Met)
	assert.InDelta(t, 1.0, *goals[1].Gap, 1e-9)
	assert.Equal(t, "no lease lost by a live relay process", goals[2].Target)
	assert.True(t, *goals[2].Met, "no process in these runs lost a lease")
	// A live process that lost leases misses the goal, and the run still passes its checks.
	rep.runs[1].procs = []procLeases{{name: "r1", leasesLost: 3}, {name: "r2"}}
	goals = rep.goals()
	assert.False(t, *goals[2].Met)
	assert.Equal(t, "2 processes: r1 lost 3", goals[2].Measured)

	var out bytes.Buffer
	rep.writeTable(&out)
	rep.writeGoals(&out)
	assert.Contains(t, out.String(), "delivery by 2 relay processes: ≥ 1.80× 1 process: 2.00× (reached)")
	assert.Contains(t, out.String(), "delivery by 4 relay processes: ≥ 3.00× 1 process: 2.00× (1.00× short)")
	assert.Contains(t, out.String(), "its share delivered again 2.00 s after its death")
	writeChecks(&out, rep.checked())
	assert.Equal(t, 1, writeVerdict(&out, rep.checked(), nil, nil), "the killed run's failed check fails the run")
	assert.Contains(t, out.String(), "delivery ×2 (one killed): every entry delivered at least once")

	assert.Contains(t, out.String(), "server ms/entry: not measured")

	var none *deliveryReport
	assert.Empty(t, none.rows())
	assert.Empty(t, none.checked())
}

// A delivery's checks fail on an entry never delivered, an ack with no handler's nil before
// it in its process, an outbox left pending and a process that did not stop cleanly.
func TestDeliveryChecks(t *testing.T) {
	committed := []entryKey{{"a", 1}, {"a", 2}}
	good := [][]deliveryLine{
		{{Kind: "deliver", Source: "a", Seq: 1, Start: 1, End: 2}, {Kind: "ack", Source: "a", Seq: 1, End: 3}},
		{{Kind: "deliver", Source: "a", Seq: 2, Start: 1, End: 2}, {Kind: "ack", Source: "a", Seq: 2, End: 3}},
	}
	for _, c := range deliveryChecks(committed, good, nil, nil, nil) {
		assert.True(t, c.ok, c.name)
	}
	bad := [][]deliveryLine{
		{{Kind: "deliver", Source: "a", Seq: 1, Start: 1, End: 2}},
		{{Kind: "ack", Source: "a", Seq: 1, End: 3}},
	}
	failed := map[string]bool{}
	for _, c := range deliveryChecks(committed, bad, []execstore.OutboxEntry{{SourceID: "a", Seq: 2}}, nil, errors.New("exit 1")) {
		failed[c.name] = !c.ok
	}
	assert.Equal(t, map[string]bool{"outbox empty at the end": true, "every entry delivered at least once": true,
		"acked after its handler returned nil": true, "relay processes stopped cleanly": true}, failed)
}

// Each row gives the relay processes' commands and the server's CPU per committed entry,
// with the ratios to 1 process; the killed row's commands are partial, and the CPU is "not
// measured" where it was not.
func TestDeliveryReportCosts(t *testing.T) {
	cost := func(store, lease int64, cpu time.Duration) deliveryCost {
		c := deliveryCost{deliveries: 205, storeCommands: commandCounts{"find": store}, leaseCommands: commandCounts{"update": lease},
			commandsComplete: true}
		if cpu > 0 {
			c.server = &serverCPU{cpu: cpu, wall: 2 * time.Second}
		}
		return c
	}
	rep := &deliveryReport{entries: 200, wait: 40 * time.Millisecond, server: "s", runs: []deliveryRun{
		{processes: 1, entries: 200, rate: 24, cost: cost(380, 20, 400*time.Millisecond)},
		{processes: 2, entries: 200, rate: 48, cost: cost(400, 40, 440*time.Millisecond)},
		{processes: 4, entries: 200, rate: 90, cost: cost(420, 80, 0)},
	}, takeOver: &deliveryRun{processes: 2, entries: 200, rate: 40, cost: deliveryCost{deliveries: 230,
		storeCommands: commandCounts{"find": 100}, leaseCommands: commandCounts{}, server: &serverCPU{cpu: time.Second, wall: time.Second}}}}

	rows := rep.rows()
	require.Len(t, rows, 4)
	assert.InDelta(t, 25.0, rows[0].LanesCeiling, 1e-9, "1 lane / 40ms")
	assert.InDelta(t, 40.0, rows[0].HandlerWaitMS, 1e-9)
	assert.Equal(t, "lanes", rows[1].Limit, "48/s of 50/s")
	assert.Equal(t, 205, rows[0].Deliveries)
	assert.Equal(t, map[string]int64{"find": 380}, rows[0].StoreCommandsByName)
	assert.Equal(t, map[string]int64{"update": 20}, rows[0].LeaseCommandsByName)
	require.NotNil(t, rows[0].CommandsPerEntry)
	assert.InDelta(t, 2.0, *rows[0].CommandsPerEntry, 1e-9, "(380+20)/200")
	assert.Nil(t, rows[0].CommandsRatioToOne)
	require.NotNil(t, rows[2].CommandsRatioToOne)
	assert.InDelta(t, 1.25, *rows[2].CommandsRatioToOne, 1e-9, "2.5 over 2.0")
	require.NotNil(t, rows[1].ServerCPUMSPerEntry)
	assert.InDelta(t, 2.2, *rows[1].ServerCPUMSPerEntry, 1e-9, "440ms/200")
	require.NotNil(t, rows[1].ServerCPURatioToOne)
	assert.InDelta(t, 1.1, *rows[1].ServerCPURatioToOne, 1e-9)
	assert.Nil(t, rows[2].ServerCPUMSPerEntry, "not measured")
	assert.Nil(t, rows[2].ServerCPURatioToOne)
	assert.True(t, rows[3].CommandsPartial, "the killed process reported none")
	assert.Nil(t, rows[3].CommandsPerEntry)
	assert.Nil(t, rows[3].CommandsRatioToOne)
	require.NotNil(t, rows[3].ServerCPUMSPerEntry)
	assert.InDelta(t, 5.0, *rows[3].ServerCPUMSPerEntry, 1e-9)

	var out bytes.Buffer
	rep.writeTable(&out)
	text := out.String()
	assert.Contains(t, text, "a 40ms handler")
	assert.Contains(t, text, "cmds/entry")
	assert.Contains(t, text, "1.25×")
	assert.Contains(t, text, "not measured")
	assert.Contains(t, text, "0.20", "server cores: 0.4 s over 2 s")
	assert.Contains(t, text, "handler calls, the redeliveries included: 205 / 205 / 205")
	assert.Contains(t, text, "commands per entry not given (the killed process reported none); server ms/entry 5.00")
	assert.Contains(t, text, "server ms/entry: the CPU of the server's processes")
}

// A run's commands are each process's in the window: its counts on the first "commands"
// line at or after the window's end (else on its final "stats" line), less those on its
// last line before the window; one with neither (killed) makes the commands partial.
func TestCostOf(t *testing.T) {
	cmds := func(kind string, end int64, find, update int64) deliveryLine {
		return deliveryLine{Kind: kind, End: end, Commands: map[string]int64{"find": find}, LeaseCommands: map[string]int64{"update": update}}
	}
	logs := [][]deliveryLine{
		{cmds("commands", 5, 2, 10), {Kind: "deliver", End: 12}, {Kind: "stats", End: 13, LeasesLost: 1}, cmds("commands", 15, 3, 11),
			{Kind: "deliver", End: 18}, cmds("commands", 25, 9, 12), cmds("commands", 30, 20, 13), cmds("stats", 40, 30, 14)},
		{{Kind: "deliver", End: 11}, cmds("stats", 40, 4, 1)},
	}
	c := costOf(logs, 10, 20)
	assert.True(t, c.commandsComplete)
	assert.Equal(t, 3, c.deliveries)
	assert.Equal(t, commandCounts{"find": 7 + 4}, c.storeCommands, "9-2 by the first, 4 by the second (its final line)")
	assert.Equal(t, commandCounts{"update": 2 + 1}, c.leaseCommands)
	assert.Equal(t, int64(14), c.commands())

	c = costOf(append(logs, []deliveryLine{{Kind: "deliver"}, {Kind: "stats", LeasesLost: 2}}), 10, 20)
	assert.False(t, c.commandsComplete, "a process with no line after the window")
	assert.Equal(t, int64(14), c.commands(), "the others' counts")

	// A last line with no command sent still says so once written and read back.
	b, err := json.Marshal(deliveryLine{Kind: "stats", Commands: map[string]int64{}, LeaseCommands: map[string]int64{}})
	require.NoError(t, err)
	var back deliveryLine
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, costOf([][]deliveryLine{{back}}, 0, 0).commandsComplete)
}
