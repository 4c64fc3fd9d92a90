package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ms returns the durations 1 ms…n ms, sorted.
func ms(n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Millisecond
	}
	return s
}

// percentile is by nearest rank: the smallest value with at least p% of the values at or
// below it.
func TestPercentileNearestRank(t *testing.T) {
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{1, 50, 1 * time.Millisecond},
		{1, 99, 1 * time.Millisecond},
		{2, 50, 1 * time.Millisecond},
		{2, 51, 2 * time.Millisecond},
		{4, 50, 2 * time.Millisecond},
		{5, 50, 3 * time.Millisecond},
		{10, 90, 9 * time.Millisecond},
		{10, 99, 10 * time.Millisecond}, // rank 9.9 rounds up: the largest
		{100, 50, 50 * time.Millisecond},
		{100, 99, 99 * time.Millisecond},
		{1000, 99, 990 * time.Millisecond},
		{7, 0, 1 * time.Millisecond},   // rank 0 is clamped to the smallest
		{7, 100, 7 * time.Millisecond}, // the largest
	} {
		require.Equal(t, tc.want, percentile(ms(tc.n), tc.p), "p%v of 1…%d ms", tc.p, tc.n)
	}
}

func TestPercentileOfUnsortedLatencies(t *testing.T) {
	lat := []time.Duration{9, 1, 5, 3, 7, 2, 8, 4, 6, 10}
	s := sortedDurations(lat)
	require.Equal(t, time.Duration(5), percentile(s, 50))
	require.Equal(t, time.Duration(10), percentile(s, 99))
	require.Equal(t, []time.Duration{9, 1, 5, 3, 7, 2, 8, 4, 6, 10}, lat, "sortedDurations leaves its input alone")
}

func TestMedian(t *testing.T) {
	require.Equal(t, 4.0, median([]float64{4}))
	require.Equal(t, 3.0, median([]float64{2, 4}))
	require.Equal(t, 5.0, median([]float64{1, 5, 100}))
	require.Equal(t, 4.5, median([]float64{1, 4, 5, 100}))
}

// The rounds of one (variant, concurrency) are summarized: events/s is the median of the
// rounds' rates, the percentiles are over every round's latencies.
func TestNewRunResultSummarizesRounds(t *testing.T) {
	cfg := config{executions: 4, rtt: 2 * time.Millisecond}
	round := func(events int64, wall time.Duration, lat []time.Duration) measured {
		return measured{
			spec: runSpec{variant: variantAIO, concurrency: 8},
			window: window{processed: events, wall: wall, latencies: lat,
				commands: commandCounts{"find": events, "update": 2 * events}},
		}
	}
	r := newRunResult(cfg, "test server", []measured{
		round(100, 2*time.Second, ms(50)),            // 50 events/s
		round(100, 1*time.Second, ms(50)[25:]),       // 100 events/s
		round(100, 4*time.Second, []time.Duration{}), // 25 events/s
	})
	require.Equal(t, 50.0, r.EventsPerS, "median of the rounds")
	require.Equal(t, []float64{25, 50, 100}, r.EventsPerSRounds)
	require.Equal(t, int64(300), r.Events)
	require.Equal(t, 3.0, r.CommandsPerEvent)
	require.Equal(t, map[string]float64{"find": 1, "update": 2}, r.CommandsPerName)
	// 75 latencies: 1…25 ms once, 26…50 ms twice; rank 38 is the second 32 ms.
	require.Equal(t, 32.0, r.P50ms)
	require.Equal(t, 50.0, r.P99ms)
	require.Equal(t, 2.0, r.RTTms)
	require.True(t, r.ChecksPassed)
}

// A failed check fails the row, and the table names the variant, the concurrency, the check
// and its offenders.
func TestFailedCheckIsNamedUnderTheTable(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1}
	st := passingFinalState()
	st.pending = append(st.pending, pendingEntry{})
	st.pending[0].Seq, st.pending[0].SourceID, st.pending[0].TargetID = 7, "exe-a", "exe-b"
	good := measured{spec: runSpec{variant: variantAIO, concurrency: 8},
		window: window{processed: 3, wall: time.Second}, checks: endOfRunChecks(passingTally(), passingFinalState())}
	bad := measured{spec: runSpec{variant: variantBatch, concurrency: 8},
		window: window{processed: 3, wall: time.Second}, checks: endOfRunChecks(passingTally(), st)}
	results := []runResult{newRunResult(cfg, "test server", []measured{good}), newRunResult(cfg, "test server", []measured{bad})}
	require.True(t, results[0].ChecksPassed)
	require.False(t, results[1].ChecksPassed)
	require.Equal(t, []string{"outbox empty at the end: 1 pending: seq 7 of exe-a → exe-b"}, results[1].FailedChecks)

	var out bytes.Buffer
	writeTable(&out, cfg, "test server", results, nil, nil)
	require.Contains(t, out.String(), "FAIL: failed checks\n  aio+batch ×8: outbox empty at the end: 1 pending: seq 7 of exe-a → exe-b\n")
	require.NotContains(t, out.String(), "PASS")
	require.Regexp(t, `aio\+batch +8 .* FAIL\n`, out.String())

	out.Reset()
	writeTable(&out, cfg, "test server", results[:1], nil, nil)
	require.Contains(t, out.String(), "PASS: every end-of-run check passed\n")
	require.NotContains(t, out.String(), "FAIL")
}

// The memory variant sends no server commands: its cmds/event is "-", and its latencies,
// well under a millisecond, are shown to the microsecond.
func TestMemoryRowHasNoCommands(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1}
	mem := measured{spec: runSpec{variant: variantMemory, concurrency: 8},
		window: window{processed: 100, wall: time.Second, latencies: []time.Duration{3 * time.Microsecond, 40 * time.Microsecond}}}
	aio := measured{spec: runSpec{variant: variantAIO, concurrency: 8},
		window: window{processed: 100, wall: 2 * time.Second, latencies: []time.Duration{12 * time.Millisecond},
			commands: commandCounts{"find": 150}}}
	results := []runResult{newRunResult(cfg, "s", []measured{aio}), newRunResult(cfg, "s", []measured{mem})}
	require.Zero(t, results[1].CommandsPerEvent)

	var out bytes.Buffer
	writeTable(&out, cfg, "s", results, nil, nil)
	require.Regexp(t, `\n +aio +8 +50\.0 +12\.0 +12\.0 +1\.50 `, out.String())
	require.Regexp(t, `\n +memory +8 +100\.0 +0\.003 +0\.040 +- `, out.String())
	require.Regexp(t, `\n +memory +8 +-\n`, out.String(), "no command of any name")

	out.Reset()
	writeTable(&out, cfg, "s", results[1:], nil, nil)
	require.NotContains(t, out.String(), "server commands per event", "no such table when only memory ran")
}
