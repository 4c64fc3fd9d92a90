package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress refresh rates: a terminal gets a line rewritten in place, anything else (a log, a
// pipe) an appended line now and then.
const (
	progressTerminal = 200 * time.Millisecond
	progressLog      = 5 * time.Second
	progressBarWidth = 24
)

// progress reports on stderr which run is going and how far it is, with a bar over all runs.
type progress struct {
	out         io.Writer
	interactive bool
	runs        int
	events      int

	mu      sync.Mutex
	done    int // runs finished
	variant string
	conc    int
	loop    *loop // nil while setting up a run
	started time.Time

	stopc chan struct{}
	wg    sync.WaitGroup
}

// startProgress reports until stop is called; runs is the number of runs to come.
func startProgress(out io.Writer, runs, events int) *progress {
	p := &progress{out: out, interactive: isTerminal(out), runs: runs, events: events, stopc: make(chan struct{})}
	every := progressLog
	if p.interactive {
		every = progressTerminal
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		width := 0
		for {
			select {
			case <-p.stopc:
				if p.interactive && width > 0 {
					fmt.Fprintf(p.out, "\r%s\r", strings.Repeat(" ", width))
				}
				return
			case <-t.C:
			}
			line := p.line()
			if line == "" {
				continue
			}
			if p.interactive {
				fmt.Fprintf(p.out, "\r%-*s", width, line)
				width = max(width, len([]rune(line)))
			} else {
				fmt.Fprintln(p.out, line)
			}
		}
	}()
	return p
}

// setup announces the run about to be set up.
func (p *progress) setup(variant string, conc int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.variant, p.conc, p.loop = variant, conc, nil
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

func (p *progress) stop() {
	close(p.stopc)
	p.wg.Wait()
}

func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.variant == "" {
		return ""
	}
	var frac float64
	var detail string
	if p.loop == nil {
		detail = "setting up"
	} else {
		n := p.loop.processed.Load()
		frac = float64(n) / float64(max(p.events, 1))
		elapsed := time.Since(p.started).Seconds()
		detail = fmt.Sprintf("%d/%d events  %.0f events/s", n, p.events, float64(n)/max(elapsed, 1e-9))
	}
	overall := (float64(p.done) + min(frac, 1)) / float64(max(p.runs, 1))
	filled := int(overall * progressBarWidth)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", progressBarWidth-filled)
	return fmt.Sprintf("bench %s %d/%d  %s ×%d: %s", bar, min(p.done+1, p.runs), p.runs, p.variant, p.conc, detail)
}

// isTerminal reports whether out is a character device, such as a terminal.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
