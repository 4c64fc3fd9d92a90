package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
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
	cfg := config{executions: 4, rtts: []time.Duration{0, 2 * time.Millisecond}}
	round := func(events int64, wall time.Duration, lat []time.Duration) measured {
		return measured{
			spec: runSpec{variant: variantAIO, concurrency: 8, rtt: 2 * time.Millisecond},
			window: window{processed: events, wall: wall, latencies: lat,
				commands: commandCounts{"find": events, "update": 2 * events},
				path:     commandCounts{"find": events, "update": events}},
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
	require.Equal(t, int64(600), r.PathCommands)
	require.Equal(t, 2.0, r.PathCommandsPerEvent)
	require.Equal(t, map[string]float64{"find": 1, "update": 1}, r.PathPerName)
	// 75 latencies: 1…25 ms once, 26…50 ms twice; rank 38 is the second 32 ms.
	require.Equal(t, 32.0, r.P50ms)
	require.Equal(t, 50.0, r.P99ms)
	require.Equal(t, 2.0, r.RTTms, "the run's round trip")
	require.True(t, r.ChecksPassed)
}

// A failed check fails the row, the checks section names the variant, the concurrency, the
// check and its offenders, and the verdict is FAIL.
func TestFailedCheckIsNamedUnderTheTable(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1, rtts: []time.Duration{0}}
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
	writeTable(&out, cfg, "test server", results, nil, nil, nil)
	require.Equal(t, 1, writeVerdict(&out, checkedWorkloads(results, nil, nil), nil, nil))
	require.Contains(t, out.String(), "\n"+checksHeading+"\n  check   engine: 1 of 2 rows passed every check\n"+
		"  FAILED  aio+batch ×8: outbox empty at the end: 1 pending: seq 7 of exe-a → exe-b\n"+
		"FAIL: 1 end-of-run check failed (listed above)\n")
	require.NotContains(t, out.String(), "PASS:")
	require.Regexp(t, `aio\+batch +0ms +8 .* FAIL\n`, out.String())

	out.Reset()
	writeTable(&out, cfg, "test server", results[:1], nil, nil, nil)
	require.Zero(t, writeVerdict(&out, checkedWorkloads(results[:1], nil, nil), nil, nil))
	require.Contains(t, out.String(), "  check   engine: 1 of 1 rows passed every check\n"+passLine+"\n")
	require.NotContains(t, out.String(), "FAIL:")
	require.NotContains(t, out.String(), "FAILED")
}

// The memory variant sends no server commands: its cmds/event is "-", and its latencies,
// well under a millisecond, are shown to the microsecond.
func TestMemoryRowHasNoCommands(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1, rtts: []time.Duration{0}}
	mem := measured{spec: runSpec{variant: variantMemory, concurrency: 8},
		window: window{processed: 100, wall: time.Second, latencies: []time.Duration{3 * time.Microsecond, 40 * time.Microsecond}}}
	aio := measured{spec: runSpec{variant: variantAIO, concurrency: 8},
		window: window{processed: 100, wall: 2 * time.Second, latencies: []time.Duration{12 * time.Millisecond},
			commands: commandCounts{"find": 150}}}
	results := []runResult{newRunResult(cfg, "s", []measured{aio}), newRunResult(cfg, "s", []measured{mem})}
	require.Zero(t, results[1].CommandsPerEvent)

	var out bytes.Buffer
	writeTable(&out, cfg, "s", results, nil, nil, nil)
	require.Regexp(t, `\n +aio +0ms +8 +50\.0 +12\.0 +12\.0 +0\.000 +0\.000 +1\.50 +0\.00 `, out.String())
	require.Regexp(t, `\n +memory +0ms +8 +100\.0 +0\.003 +0\.040 +0\.000 +0\.000 +- +- `, out.String())
	require.Regexp(t, `\n +memory +0ms +8 +-\n`, out.String(), "no command of any name")

	out.Reset()
	writeTable(&out, cfg, "s", results[1:], nil, nil, nil)
	require.NotContains(t, out.String(), "server commands per event", "no such table when only memory ran")
}

// Every ratio is taken within the same round trip and concurrency: ×seed-port, ×aio and ×raw.
func TestRatiosWithinRoundTripAndConcurrency(t *testing.T) {
	row := func(variant string, conc int, rtt, eps float64) runResult {
		return runResult{Variant: variant, Concurrency: conc, RTTms: rtt, EventsPerS: eps}
	}
	results := []runResult{
		row(variantSeedPort, 1, 0, 50), row(variantAIO, 1, 0, 100), row(variantCache, 1, 0, 150), row(variantRaw, 1, 0, 200),
		row(variantSeedPort, 1, 10, 10), row(variantAIO, 1, 10, 20), row(variantCache, 1, 10, 60), row(variantRaw, 1, 10, 30),
		row(variantAIO, 64, 10, 80), row(variantCache, 64, 10, 120),
	}
	fillRatios(results)
	require.Equal(t, 3.0, *results[2].RatioSeedPort)
	require.Equal(t, 1.5, *results[2].RatioAIO)
	require.Equal(t, 0.75, *results[2].RatioRaw)
	require.Equal(t, 6.0, *results[6].RatioSeedPort, "at 10ms, against the seed-port at 10ms")
	require.Equal(t, 3.0, *results[6].RatioAIO)
	require.Equal(t, 2.0, *results[6].RatioRaw)
	require.Equal(t, 1.5, *results[9].RatioAIO, "at 64 handlers, against aio at 64")
	require.Nil(t, results[9].RatioSeedPort, "no seed-port at 64 handlers and 10ms")
	require.Nil(t, results[9].RatioRaw)
}

// With several round trips the table has a row per (variant, round trip, concurrency),
// ordered by round trip, then concurrency, then variant, an empty row between groups, and no
// line ends in spaces. The failed checks name the round trip.
func TestTableOfSeveralRoundTrips(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1, rtts: []time.Duration{10 * time.Millisecond, 0}}
	var results []runResult
	for _, rtt := range cfg.rtts {
		for _, conc := range []int{64, 1} {
			for _, v := range []string{variantRaw, variantCache} {
				m := measured{spec: runSpec{variant: v, concurrency: conc, rtt: rtt},
					window: window{processed: 100, wall: time.Second, latencies: []time.Duration{time.Millisecond},
						commands: commandCounts{"update": 150}, path: commandCounts{"update": 100}},
					checks: []check{{name: "c", ok: rtt == 0 || v != variantCache || conc != 1, detail: "broken"}}}
				results = append(results, newRunResult(cfg, "s", []measured{m}))
			}
		}
	}
	fillRatios(results)
	var out bytes.Buffer
	writeTable(&out, cfg, "s", results, nil, nil, nil)
	text := out.String()
	require.Contains(t, text, "added round trip 10ms, 0ms (in-process proxy)\n")
	require.Regexp(t, `\n +variant +rtt +concurrency +events/s +p50 ms +p99 ms +delivery p50 +delivery p99 +cmds/event +path cmds/event +×seed-port +×aio +×raw +heap MiB +checks\n`, text)
	require.Regexp(t, `\n +aio\+cache +0ms +1 +100\.0 +1\.0 +1\.0 +0\.000 +0\.000 +1\.50 +1\.00 +- +- +1\.00 .* ok\n +raw +0ms +1 .*\n\n +aio\+cache +0ms +64 `, text)
	require.Regexp(t, `\n +raw +0ms +64 .*\n\n +aio\+cache +10ms +1 .* FAIL\n +raw +10ms +1 `, text)
	require.Regexp(t, `\nserver commands per event, by command\n +variant +rtt +concurrency +update\n +aio\+cache +0ms +1 +1\.50\n`, text)
	require.NotRegexp(t, `(?m) $`, text, "no line ends in a space")
	require.Contains(t, text, "\n  FAILED  aio+cache ×1 +10ms: c: broken\n")
}

// The chart has a panel of events/s by concurrency per round trip and, with more than one
// round trip, a second row of events/s by round trip at the lowest and highest concurrency.
func TestChartPanels(t *testing.T) {
	var results []runResult
	for _, rtt := range []float64{0, 2, 10} {
		for _, conc := range []int{1, 64} {
			for _, v := range []string{variantSeedPort, variantCache, variantMemory} {
				results = append(results, runResult{Variant: v, RTTms: rtt, Concurrency: conc, EventsPerS: 100 / (1 + rtt)})
			}
		}
	}
	size := func(results []runResult) image.Point {
		path := filepath.Join(t.TempDir(), "bench.png")
		require.NoError(t, writeChart(path, "test server", results))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		cfg, err := png.DecodeConfig(f)
		require.NoError(t, err)
		return image.Point{X: cfg.Width, Y: cfg.Height}
	}
	one := size(slices.DeleteFunc(slices.Clone(results), func(r runResult) bool { return r.RTTms != 0 }))
	three := size(results)
	require.InDelta(t, 3*one.X, three.X, 2, "three panels by concurrency side by side: %v, %v", one, three)
	require.Greater(t, three.Y, one.Y*3/2, "a second row, by round trip: %v, %v", one, three)
}
