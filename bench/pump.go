package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// How the workload runs package relay's Relay and Sweeper.
const (
	// pollInterval is how often they scan when no commit wakes them: relay's default. Every
	// commit of a run is made in this process, through a store that wakes them, so the poll
	// is only the fallback. At 250 ms the polls were most of the embedded server's finds
	// (0.9–1.2 commands per event at 64 handlers, against 0.32–0.53 at 1 s).
	pollInterval = time.Second
	// retryMin and retryMax bound the relay's back-off after a withheld ack (see withholdAck):
	// the entry is delivered again soon, as a relay that restarts would.
	retryMin = time.Millisecond
	retryMax = 20 * time.Millisecond
	// relayGap is the relay's ScanGap on a server: under a stream of commits, one scan per
	// relayGap gathers what they emitted, rather than one scan per commit.
	relayGap = 100 * time.Millisecond
	// sweepGap is the sweeper's ScanGap: a timer fires up to this late, and each look fires
	// every timer due by then, rather than one look per fire time.
	sweepGap = 250 * time.Millisecond
	// drainCheck is how often the workload looks whether the budget is processed and every
	// entry acked (entries still to deliver again: withheld ones).
	drainCheck = 5 * time.Millisecond
	// stallAfter is how long the workload waits without an event processed before it looks
	// for a lost event.
	stallAfter = 10 * time.Second
)

// run delivers the run's events with a relay.Relay whose lanes are the handlers (concurrency
// of them: one execution's events are handled one at a time, in order) and fires its timers
// with a relay.Sweeper, both on the variant's relay store, until the budget is processed and
// the outbox is empty. It reports every handled delivery to l.
func (w *workload) run(ctx context.Context, concurrency int, l *loop) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	log := newAckLog(w.store.relayStore())
	defer log.release()
	w.log = log
	opts := relay.Options{Lanes: concurrency, PollInterval: pollInterval, ScanGap: w.scanGap(),
		RetryMin: retryMin, RetryMax: retryMax,
		OnError: func(err error) {
			// A handler's failure ends the run: the workload's handlers fail only on what
			// must not happen (a conflict streak, a missing execution, a store error).
			if re := (*relay.Error)(nil); errors.As(err, &re) && re.Op == relay.OpHandle {
				cancel(err)
			}
		}}
	if t, ok := w.store.(interface {
		telemetry() (trace.TracerProvider, metric.MeterProvider)
	}); ok {
		opts.TracerProvider, opts.MeterProvider = t.telemetry()
	}
	r := relay.New(log.relayed, func(ctx context.Context, e execstore.OutboxEntry) error { return w.deliver(ctx, e, l) }, opts)
	sweepOpts := opts
	sweepOpts.ScanGap = sweepGap
	sw := relay.NewSweeper(log.relayed, w.fire, sweepOpts)
	w.relay, w.sweeper = r, sw

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.Run(gctx) })
	g.Go(func() error { return sw.Run(gctx) })
	g.Go(func() error {
		err := w.awaitDone(gctx, log, r)
		cctx, ccancel := cleanupContext(ctx)
		defer ccancel()
		return errors.Join(err, r.Close(cctx), sw.Close(cctx))
	})
	err := g.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// scanGap is the relay's ScanGap: none for the memory variant, whose scans cost no server
// command; relayGap for a server's.
func (w *workload) scanGap() time.Duration {
	if w.store.name() == variantMemory {
		return 0
	}
	return relayGap
}

// awaitDone returns once every event of the budget is processed and r has acked every entry
// (each event is one entry: the outbox is then empty), or with the reason when progress stops
// with events missing (see stalled). It reads r's counters, not the store, so that it sends
// no command of its own.
func (w *workload) awaitDone(ctx context.Context, store execstore.Store, r *relay.Relay) error {
	tick := time.NewTicker(drainCheck)
	defer tick.Stop()
	last, lastAt := w.processedN.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil // the relay's or sweeper's error, or the run's end, says why
		case <-tick.C:
		}
		n := w.processedN.Load()
		if n >= int64(w.total) {
			if r.Stats().Acked >= int64(w.total) {
				return nil
			}
			continue
		}
		if n != last {
			last, lastAt = n, time.Now()
			continue
		}
		if time.Since(lastAt) > stallAfter {
			if err := w.stalled(ctx, store); err != nil {
				return err
			}
			lastAt = time.Now()
		}
	}
}

// deliver is the relay's handler: it processes the event of outbox entry e (see process) and
// returns nil, so that the relay acks it, except on the first handling of an entry chosen by
// withholdAck, which it leaves pending (relay.ErrLeavePending), as a relay that stops
// between a handler's return and the ack would: the entry is delivered again, and the
// handler's dedupe must skip the second copy.
func (w *workload) deliver(ctx context.Context, e execstore.OutboxEntry, l *loop) error {
	start := time.Now()
	d, err := w.parseEntry(e)
	if err != nil {
		return err
	}
	k := entryKey{e.SourceID, e.Seq}
	w.mu.Lock()
	seen := w.delivered[k]
	w.delivered[k]++
	w.mu.Unlock()
	if seen > 0 {
		w.redelivered.Add(1)
		if w.log.wasAcked(k) {
			w.reappeared.Add(1)
		}
	} else if at := w.emitAt[d.n].Load(); at != 0 {
		l.deliveredAfter(start.Sub(time.Unix(0, at)))
	}
	l.started()
	processed, err := w.process(ctx, d)
	l.handled(processed, time.Since(start), err)
	if err != nil {
		return err
	}
	if seen == 0 && w.withholdAck(d.n) {
		return relay.ErrLeavePending
	}
	return nil
}

// fire is the sweeper's handler: a due timer fires (the workload's timers carry nothing to
// do), and the sweeper deletes it with the guarded bulk delete.
func (w *workload) fire(context.Context, execstore.DueTimer) error {
	w.fired.Add(1)
	return nil
}

// stalled is called when no event was processed for stallAfter before the budget was. If
// the outbox is empty, nothing can ever emit the missing events: it names them.
func (w *workload) stalled(ctx context.Context, store execstore.Store) error {
	entries, err := store.PendingOutbox(ctx, 1)
	if err != nil {
		return fmt.Errorf("pending outbox: %w", err)
	}
	if len(entries) > 0 || w.processedN.Load() >= int64(w.total) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost, never []string
	for n := range w.total {
		if w.processed[n] > 0 {
			continue
		}
		if w.emitted[n] > 0 {
			lost = append(lost, eventID(n))
		} else {
			never = append(never, eventID(n))
		}
	}
	msg := fmt.Sprintf("stalled: %d of %d events processed, the outbox is empty and none was processed for %v",
		w.processedN.Load(), w.total, stallAfter)
	if len(lost) > 0 {
		msg += fmt.Sprintf("; emitted by a successful commit but never delivered or processed: %s", listed(lost))
	}
	if len(never) > 0 {
		msg += fmt.Sprintf("; never emitted: %s", listed(never))
	}
	if len(w.skippedEarly) > 0 {
		msg += fmt.Sprintf("; skipped as already processed before any commit processed them: %s", listed(w.skippedEarly))
	}
	return errors.New(msg)
}

// sweepAll deletes, with a Sweeper on the relay store, every timer due at horizon: the end
// of a run, once every timer ever armed is due. It returns when a look finds none left.
func (w *workload) sweepAll(ctx context.Context, horizon time.Time) error {
	store := w.store.relayStore()
	sw := relay.NewSweeper(store, w.fire, relay.Options{PollInterval: pollInterval,
		Clock: func() time.Time { return horizon }})
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runErr = sw.Run(runCtx)
	}()
	tick := time.NewTicker(drainCheck)
	defer tick.Stop()
	var err error
	for err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			continue
		case <-tick.C:
		}
		var due []execstore.DueTimer
		if due, err = store.DueTimers(ctx, horizon, 1); err == nil && len(due) == 0 {
			break
		}
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	err = errors.Join(err, sw.Close(cctx))
	stop()
	wg.Wait()
	return errors.Join(err, runErr)
}
