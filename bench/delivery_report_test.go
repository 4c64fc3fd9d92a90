package main

import (
	"bytes"
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
