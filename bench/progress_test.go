package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// drive takes p through the first of two runs and into the second, reporting at each step.
func drive(p *progress) {
	p.report() // before the first run: nothing to say
	p.setup(variantAIO, 8, 0)
	p.report()
	l := &loop{}
	l.processed.Store(40)
	p.begin(l)
	p.report()
	p.end()
	p.setup(variantRaw, 8, 2*time.Millisecond)
	p.report()
}

// In a log (not a terminal) progress is plain lines: no carriage return, no escape sequence.
func TestProgressInALogIsPlainLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, 2, 100)
	drive(p)
	p.stop()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "bench: run 1/2 aio ×8: setting up", lines[0])
	require.Regexp(t, `^bench: run 1/2 aio ×8: 40/100 events, \d+ events/s$`, lines[1])
	require.Equal(t, "bench: run 2/2 raw ×8 +2ms: setting up", lines[2], "a round trip added is named")
	require.NotContains(t, out.String(), "\r")
	require.NotContains(t, out.String(), "\x1b")
}

// On a terminal progress is one bar redrawn in place, cleared when it stops.
func TestProgressOnATerminalIsABar(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true, 2, 100)
	drive(p)
	require.NotContains(t, out.String(), "\n", "redrawn in place")
	require.Contains(t, out.String(), "\r")
	require.Contains(t, out.String(), "20% |") // 40 of 200 events
	require.Contains(t, out.String(), "run 1/2 aio ×8: 40/100 events")
	require.Contains(t, out.String(), "50% |") // the first run done
	require.Contains(t, out.String(), "run 2/2 raw ×8 +2ms: setting up")
	p.stop()
	require.True(t, strings.HasSuffix(out.String(), " \r"), "cleared: %q", out.String()[max(0, out.Len()-20):])
}

func TestProgressStartStop(t *testing.T) {
	var out bytes.Buffer
	p := startProgress(&out, false, 1, 10)
	p.setup(variantAIO, 1, 0)
	p.end()
	p.stop() // returns once the reporting goroutine has
}
