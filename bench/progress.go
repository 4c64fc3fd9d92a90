package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// How progress is shown: on a terminal, a bar redrawn in place (github.com/schollz/progressbar);
// anywhere else (a file, a pipe, CI), a plain line now and then, so that a log holds no
// carriage returns or escape sequences.
const (
	progressTerminal = 200 * time.Millisecond // between redraws of the bar
	progressLog      = 5 * time.Second        // between lines of a log
	progressBarWidth = 24                     // the bar's cells, fewer when the terminal is narrow
)

// progress reports which run is going and how far it is, over all the runs to come. The
// runs tell it where they are (setup, begin, end); it reports on its own schedule.
type progress struct {
	out    io.Writer
	bar    *progressbar.ProgressBar // nil when out is not a terminal
	runs   int
	events int // events of each run

	mu      sync.Mutex
	done    int // runs finished
	variant string
	conc    int
	rtt     time.Duration
	loop    *loop // nil while setting up a run
	started time.Time

	stopc chan struct{}
	wg    sync.WaitGroup
}

// newProgress returns a progress that reports on out, as a bar if out is a terminal. runs is
// the number of runs to come, events the events of each. It reports only when report is
// called; startProgress reports on a schedule.
func newProgress(out io.Writer, terminal bool, runs, events int) *progress {
	p := &progress{out: out, runs: runs, events: events, stopc: make(chan struct{})}
	if terminal {
		p.bar = progressbar.NewOptions64(int64(max(runs, 1))*progressPerRun,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetWidth(progressBarWidth),
			progressbar.OptionShowDescriptionAtLineEnd(),
		)
	}
	return p
}

// startProgress returns a progress that reports on out until stop is called: on a terminal
// every progressTerminal, elsewhere every progressLog.
func startProgress(out io.Writer, terminal bool, runs, events int) *progress {
	p := newProgress(out, terminal, runs, events)
	every := progressLog
	if terminal {
		every = progressTerminal
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				p.report()
			}
		}
	}()
	return p
}

// setup announces the run about to be set up: variant at concurrency conc, with rtt added
// to every round trip.
func (p *progress) setup(variant string, conc int, rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.variant, p.conc, p.rtt, p.loop = variant, conc, rtt, nil
}

// begin announces that the run's window opened, measured by l.
func (p *progress) begin(l *loop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loop, p.started = l, time.Now()
}

// end announces that the run finished.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.loop = nil
}

// stop ends the reports and, on a terminal, clears the bar, so that what is printed next
// starts on a clean line.
func (p *progress) stop() {
	close(p.stopc)
	p.wg.Wait()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

// report shows where the runs are: the bar redrawn, or one line.
func (p *progress) report() {
	line, overall, ok := p.status()
	if !ok {
		return
	}
	if p.bar == nil {
		fmt.Fprintf(p.out, "bench: %s\n", line)
		return
	}
	// Errors of a redraw on stderr are not worth stopping a run for.
	_ = p.bar.Set64(overall)
	p.bar.Describe(line)
}

// status returns the current run as a line ("run 4/12 raw ×1: 29/100 events, 113 events/s",
// "run 5/12 aio ×8 +2ms: setting up")
// and the events processed over every run so far; ok is false before the first run.
func (p *progress) status() (line string, overall int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.variant == "" {
		return "", 0, false
	}
	line = fmt.Sprintf("run %d/%d %s ×%d", min(p.done+1, p.runs), p.runs, p.variant, p.conc)
	if p.rtt > 0 {
		line += " +" + p.rtt.String()
	}
	line += ": "
	overall = int64(p.done) * progressPerRun
	if p.loop == nil {
		return line + "setting up", overall, true
	}
	n := p.loop.processed.Load()
	rate := float64(n) / max(time.Since(p.started).Seconds(), 1e-9)
	line += fmt.Sprintf("%d/%d events, %.0f events/s", n, p.events, rate)
	return line, overall + min(n, int64(p.events))*progressPerRun/int64(max(p.events, 1)), true
}

// setEvents sets the events of each run to come (a level's budget, see levelEvents).
func (p *progress) setEvents(events int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = events
}

// progressPerRun is how many steps of the bar one run is.
const progressPerRun = 1000
