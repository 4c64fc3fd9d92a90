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
	progressTerminal = 250 * time.Millisecond
	progressLog      = 5 * time.Second
)

// startProgress reports w's progress on out until the returned function is called.
func startProgress(out io.Writer, w *workload) (stop func()) {
	interactive := isTerminal(out)
	every := progressLog
	if interactive {
		every = progressTerminal
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		width := 0
		for {
			select {
			case <-done:
				if interactive && width > 0 {
					fmt.Fprintf(out, "\r%s\r", strings.Repeat(" ", width))
				}
				return
			case <-t.C:
			}
			line := progressLine(w)
			if interactive {
				fmt.Fprintf(out, "\r%-*s", width, line)
				width = max(width, len(line))
			} else {
				fmt.Fprintln(out, line)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func progressLine(w *workload) string {
	n := w.processedN.Load()
	started := w.started.Load()
	if started == 0 {
		return fmt.Sprintf("bench: creating %d executions", len(w.ids))
	}
	elapsed := time.Since(time.Unix(0, started)).Seconds()
	return fmt.Sprintf("bench: %d/%d events  %.0f events/s  %d conflicts  %d duplicates skipped",
		n, w.total, float64(n)/max(elapsed, 1e-9), w.conflicts.Load(), w.duplicates.Load())
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
