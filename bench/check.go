package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/connect"
)

// maxListed bounds how many offenders a failed check names.
const maxListed = 5

// check is the verdict of one end-of-run check.
type check struct {
	name   string
	ok     bool
	detail string
}

// tally is what a workload counted during a run, as the end-of-run checks read it.
type tally struct {
	budget       int         // events 0…budget-1 make up the run
	emitted      map[int]int // event number → successful commits that emitted it
	processed    map[int]int // event number → successful commits that processed it
	skippedEarly []string    // events called processed before any commit processed them
	commits      int64       // successful commits, the creating ones included
	processedN   int64       // distinct events processed
	traced       int64       // successful commits that carried a trace step
	duplicates   int64       // deliveries skipped as already processed
	redelivered  int64       // deliveries of an entry the relay had delivered before
	acks         int64
	reappeared   int64 // entries a scan returned after they were acked
	// ackedMayReturn: the server is one where an acked entry has been seen to come back (see
	// ackedMayReturn); a reappeared entry is then reported, and the dedupe must absorb it.
	ackedMayReturn bool
}

// check verifies the run against the store's final state.
func (w *workload) check(ctx context.Context) ([]check, error) {
	w.mu.Lock()
	lastFire := w.maxFireAt
	w.mu.Unlock()
	// Every timer ever armed is due by then; the far horizon also catches a wrong fire time.
	st, err := w.store.final(ctx, w.ids, lastFire.Add(time.Hour))
	if err != nil {
		return nil, fmt.Errorf("reading the final state for the checks: %w", err)
	}
	return endOfRunChecks(w.tally(), st), nil
}

// tally returns what the workload has counted so far.
func (w *workload) tally() tally {
	w.mu.Lock()
	defer w.mu.Unlock()
	return tally{
		budget:       w.total,
		emitted:      maps.Clone(w.emitted),
		processed:    maps.Clone(w.processed),
		skippedEarly: slices.Clone(w.skippedEarly),
		commits:      w.commits.Load(),
		processedN:   w.processedN.Load(),
		traced:       w.traced.Load(),
		duplicates:   w.duplicates.Load(),
		redelivered:  w.redelivered.Load(),
		acks:         w.acks(),
		reappeared:   w.reappeared.Load(),

		ackedMayReturn: w.cfg.ackedMayReturn,
	}
}

// endOfRunChecks checks a store-backed run: what the workload counted, t, against the store's
// final state, st. Each check's detail names its first offenders when it fails.
func endOfRunChecks(t tally, st finalState) []check {
	return []check{
		checkExactlyOnce(t.budget, t.emitted, t.processed),
		checkDedupe(t.redelivered, t.duplicates),
		checkNoEarlySkip(t.skippedEarly),
		checkVersions(st.exes, t.commits),
		checkSnapshots(st.exes, int(t.processedN)),
		checkTraces(st.exes, t.traced),
		checkOutbox(st.pending),
		checkAcks(t.acks, t.reappeared, t.ackedMayReturn),
		checkTimers(st.timers),
	}
}

// checkExactlyOnce: every event of the budget was emitted by exactly one successful commit
// and processed by exactly one.
func checkExactlyOnce(budget int, emitted, processed map[int]int) check {
	c := check{name: "every emitted event processed exactly once"}
	var bad []string
	for n := range budget {
		e, p := emitted[n], processed[n]
		if e != 1 || p != 1 {
			bad = append(bad, fmt.Sprintf("%s emitted %d×, processed %d×", eventID(n), e, p))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(emitted)) {
		if n < 0 || n >= budget {
			bad = append(bad, fmt.Sprintf("event %d is outside the budget", n))
		}
	}
	c.ok = len(bad) == 0
	if c.ok {
		c.detail = fmt.Sprintf("%d emitted, %d processed", len(emitted), len(processed))
	} else {
		c.detail = listed(bad)
	}
	return c
}

// checkDedupe: each event the relay delivered a second time was recognised as processed
// (by LoadForEvent, or by the commit's dedupe guard) and skipped. The handler that owns an execution handles its deliveries in
// order, so the second copy always comes after the first one's commit.
func checkDedupe(redelivered, duplicates int64) check {
	return check{
		name:   "every redelivered event skipped by dedupe",
		ok:     duplicates == redelivered,
		detail: fmt.Sprintf("%d redelivered, %d skipped", redelivered, duplicates),
	}
}

// checkNoEarlySkip: neither LoadForEvent nor a commit's dedupe guard called an event
// processed before a commit had processed it (such an event is lost).
func checkNoEarlySkip(skippedEarly []string) check {
	c := check{name: "no event called processed before it was", ok: len(skippedEarly) == 0}
	if c.ok {
		c.detail = "0 early skips"
	} else {
		c.detail = fmt.Sprintf("%d early skips: %s", len(skippedEarly), listed(skippedEarly))
	}
	return c
}

// checkVersions: the stored versions add up to the successful commits (each creates or
// advances exactly one version), and no store found its own document inconsistent.
func checkVersions(exes []storedExecution, commits int64) check {
	c := check{name: "stored versions add up to the successful commits"}
	var sum int64
	var bad []string
	for _, exe := range exes {
		switch {
		case !exe.found:
			bad = append(bad, fmt.Sprintf("execution %s not found", exe.id))
			continue
		case exe.problem != "":
			bad = append(bad, fmt.Sprintf("%s: %s", exe.id, exe.problem))
		}
		sum += exe.version
	}
	c.ok = len(bad) == 0 && sum == commits
	c.detail = fmt.Sprintf("sum of versions %d, commits %d", sum, commits)
	if len(bad) > 0 {
		c.detail += "; " + listed(bad)
	}
	return c
}

// checkSnapshots: every stored snapshot counts one handled event per version past its
// creation, and the counts add up to the events processed.
func checkSnapshots(exes []storedExecution, events int) check {
	c := check{name: "snapshots count every processed event"}
	var sum int
	var bad []string
	for _, exe := range exes {
		if !exe.found {
			continue // reported by checkVersions
		}
		var s snapshot
		if err := json.Unmarshal(exe.data, &s); err != nil {
			bad = append(bad, fmt.Sprintf("%s: snapshot %q: %v", exe.id, exe.data, err))
			continue
		}
		if int64(s.Handled) != exe.version-1 {
			bad = append(bad, fmt.Sprintf("%s: %d handled at version %d", exe.id, s.Handled, exe.version))
		}
		sum += s.Handled
	}
	c.ok = len(bad) == 0 && sum == events
	c.detail = fmt.Sprintf("%d handled in snapshots, %d processed", sum, events)
	if len(bad) > 0 {
		c.detail += "; " + listed(bad)
	}
	return c
}

// checkTraces: the trace steps the store recorded add up to the commits that carried one.
func checkTraces(exes []storedExecution, traced int64) check {
	var sum int64
	for _, exe := range exes {
		sum += exe.traced
	}
	return check{
		name:   "trace steps add up to the traced commits",
		ok:     sum == traced,
		detail: fmt.Sprintf("%d recorded, %d traced commits", sum, traced),
	}
}

func checkOutbox(pending []pendingEntry) check {
	c := check{name: "outbox empty at the end", ok: len(pending) == 0}
	if c.ok {
		c.detail = "0 pending"
		return c
	}
	var first []string
	for _, e := range pending {
		first = append(first, fmt.Sprintf("seq %d of %s → %s", e.Seq, e.SourceID, e.TargetID))
	}
	c.detail = fmt.Sprintf("%d pending: %s", len(pending), listed(first))
	return c
}

// checkAcks: an entry once acked never came back in a later scan. On a server where acked
// entries have been measured to come back (mayReturn), one that does is reported, not
// failed: the relay must not rely on its ack there, and checkDedupe and checkExactlyOnce
// hold the handlers to skipping it.
func checkAcks(acks, reappeared int64, mayReturn bool) check {
	c := check{
		name:   "no acked outbox entry came back",
		ok:     reappeared == 0,
		detail: fmt.Sprintf("%d acks, %d reappeared", acks, reappeared),
	}
	if !c.ok && mayReturn {
		c.ok = true
		c.detail += " (this server has been measured to return acked entries; the handlers' dedupe skipped them)"
	}
	return c
}

// ackedMayReturn reports whether family is one where an outbox entry whose ack returned
// without error has been measured to come back in a later scan of the pending outbox
// (FerretDB 2.x on DocumentDB: 1 to 14 of 1,000, with this module's store and with an
// independent port of the seed's design alike), so that only the handlers' dedupe, never the
// ack, keeps an event from taking effect twice.
func ackedMayReturn(family connect.Family) bool {
	return family == connect.FamilyFerretDB2 || family == connect.FamilyDocumentDB
}

func checkTimers(left []execstore.DueTimer) check {
	c := check{name: "no timer left after the final sweep", ok: len(left) == 0}
	if c.ok {
		c.detail = "0 left"
		return c
	}
	var first []string
	for _, t := range left {
		first = append(first, fmt.Sprintf("%s %s at %s", t.ExecutionID, t.Path, t.FireAt.Format(time.RFC3339Nano)))
	}
	c.detail = fmt.Sprintf("%d left: %s", len(left), listed(first))
	return c
}

// listed joins the first few items of s, saying how many more there are.
func listed(s []string) string {
	if len(s) <= maxListed {
		return strings.Join(s, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(s[:maxListed], "; "), len(s)-maxListed)
}
