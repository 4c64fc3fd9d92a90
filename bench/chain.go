package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
)

// The chain workload of the delivery section: chains of events that hop between two
// executions, each hop a commit whose outbox entry a relay hands to the next handler, by 1,
// 2 and 4 relay processes. It measures each hop's latency from the emitting commit's return
// to the next handler's start: within a process the store hands the entry to the relay in
// memory; across processes the emitting store's mark on the board wakes the receiving relay
// (or, when the mark is lost or late, its next poll).
const (
	workloadChain = "chain" // the relay processes' handler (envRelayWorkload)
	defaultChain  = "16x10" // -chain's default
	maxChainSize  = 1000    // bounds -chain's chains and hops
	chainDeadline = 60 * time.Second
)

// chainRun is what one run of the chains measured, by processes relay processes.
type chainRun struct {
	processes int
	// placed: each chain's b is named into a's partition (execstore.PlaceWith), so that one
	// relay process holds both and every hop stays in its memory.
	placed bool
	// faults: as the seeds are committed, one more relay process starts, and the others hand
	// it partitions mid-chain; once a third of the hops are handled, the process with the
	// most chains under way is killed with SIGKILL (chainVictim), and the others take its
	// partitions over when its leases run out. The chains are longer (faultHops), to run
	// through both.
	faults  bool
	hops    int // per chain, after its seed
	kill    chainKill
	measure chainMeasure
	cost    deliveryCost
	wall    time.Duration // from the seeds' commits to every hop acked
	// relayStats sums the processes' last "stats" lines: HandedOver, Targeted and Woken.
	relayStats deliveryLine
	checks     []check
}

// The chains of a run with faults are as many times longer than -chain's as make the
// chains of the run without faults by as many processes, spread or placed alike, last
// faultChainSpan on average, and at most maxFaultHopsFactor times longer: long enough to
// outlast the partitions handed over to the joining process.
const (
	faultChainSpan     = 1500 * time.Millisecond
	maxFaultHopsFactor = 4
)

// faultHops returns the hops of the chains of a run with faults, hops those of -chain, by
// the mean chain time of the run without faults it follows (0: none measured).
func faultHops(hops int, chainMean time.Duration) int {
	if chainMean <= 0 {
		return hops * maxFaultHopsFactor
	}
	return hops * min(max(int((faultChainSpan+chainMean-1)/chainMean), 1), maxFaultHopsFactor)
}

// chainKill says which relay process a run with faults killed (proc, the index of its log;
// -1: none) and when (Unix nanoseconds), and which joined (joiner, the index of its log).
type chainKill struct {
	proc   int
	at     int64
	joiner int
}

// noKill is a run without faults.
var noKill = chainKill{proc: -1, joiner: -1}

// runChains runs the chains by 1, 2 and 4 relay processes, each run on a database of its
// own.
func (e *environment) runChains(ctx context.Context, cfg config, stamp string) (*chainReport, error) {
	rep := &chainReport{chains: cfg.chains, hops: cfg.chainHops, server: e.description}
	fmt.Fprintf(os.Stderr, "bench: %d chains of %d hops by 1, 2 and 4 relay processes, then by 4 with one joining and one killed\n", cfg.chains, cfg.chainHops)
	for _, run := range chainRuns(cfg.chainHops) {
		n := run.processes
		if run.faults {
			run.hops = faultHops(run.hops, rep.chainMean(n, run.placed))
		}
		db := fmt.Sprintf("bench_%s_%d_chain_%d%s%s", stamp, os.Getpid(), n, map[bool]string{true: "_placed"}[run.placed],
			map[bool]string{true: "_faults"}[run.faults])
		run, err := e.chain(ctx, cfg, db, run)
		if !cfg.keep {
			e.dropAtEnd(db)
		}
		if err != nil {
			return nil, fmt.Errorf("chains by %d relay processes (placed: %v, faults: %v): %w", n, run.placed, run.faults, err)
		}
		rep.runs = append(rep.runs, run)
	}
	return rep, nil
}

// chainMean returns the mean chain time of the report's run without faults by processes,
// spread or placed; 0 when there is none.
func (c *chainReport) chainMean(processes int, placed bool) time.Duration {
	for _, r := range c.runs {
		if r.processes == processes && r.placed == placed && !r.faults {
			return r.measure.meanChainTime()
		}
	}
	return 0
}

// chain runs the chains once: n relay processes share db's partitions, the bench creates
// every chain's pair and commits its seed, and the processes' handlers pass each chain's
// event back and forth until its last hop; with faults, one more process joins and one is
// killed meanwhile.
func (e *environment) chain(ctx context.Context, cfg config, db string, run chainRun) (_ chainRun, err error) {
	n := run.processes
	run.kill = noKill
	store, children, join, stop, err := e.startRelays(ctx, cfg, db, "chain", n, workloadChain)
	defer func() { err = errors.Join(err, stop()) }()
	if err != nil {
		return run, err
	}
	deadline := time.Now().Add(chainDeadline)
	if err := waitLogs(ctx, children, deadline, chainDeadline, "the relay processes sharing the partitions", func(l [][]deliveryLine) bool {
		return balanced(l, store.Partitions())
	}); err != nil {
		return run, err
	}
	pairs, err := chainPairs(cfg.seed, cfg.chains, run.placed, store.Partitions())
	if err != nil {
		return run, err
	}
	senders, err := createChains(ctx, store, pairs)
	if err != nil {
		return run, err
	}
	from := time.Now()
	seeds, err := seedChains(ctx, store, pairs, senders, run.hops)
	if err != nil {
		return run, err
	}
	deadline = time.Now().Add(chainDeadline)
	if run.faults {
		if run.kill, children, err = chainFaults(ctx, join, children, deadline, run.hops, cfg.chains*(run.hops+1)/3); err != nil {
			return run, err
		}
	}
	waitErr := waitLogs(ctx, children, deadline, chainDeadline, "every hop handled and acked", func(l [][]deliveryLine) bool {
		return chainsDone(l, cfg.chains, run.hops, run.kill.proc)
	})
	to := time.Now()
	if waitErr == nil {
		if waitErr, err = drained(ctx, store, deadline, chainDeadline); err != nil {
			return run, err
		}
	}
	stopErr := stopRelays(cfg, children, run.kill.proc, waitErr != nil)
	l, err := childLogs(children)
	if err != nil {
		return run, err
	}
	stored, err := chainStates(ctx, store, pairs)
	if err != nil {
		return run, err
	}
	pending, err := store.PendingOutbox(ctx, 0)
	if err != nil {
		return run, err
	}
	run.measure = measureChains(l, seeds, cfg.chains, run.hops)
	run.cost = costOf(l, from.UnixNano(), to.UnixNano())
	run.wall = to.Sub(from)
	run.relayStats = lastStatsSum(l)
	run.checks = chainChecks(l, stored, cfg.chains, run.hops, pending, run.kill, waitErr, stopErr)
	return run, nil
}

// chainFaults starts one more relay process (join) beside children, then, once handled hops
// of chains of hops hops have been handled (not as duplicates), kills the process
// chainVictim names, and returns who was killed, when, and the children with the one that
// joined.
func chainFaults(ctx context.Context, join func(string) (*relayChild, error), children []*relayChild, deadline time.Time,
	hops, handled int) (chainKill, []*relayChild, error) {
	kill := noKill
	joiner, err := join(fmt.Sprintf("r%d", len(children)+1))
	if err != nil {
		return kill, children, err
	}
	kill.joiner, children = len(children), append(children, joiner)
	err = waitLogs(ctx, children, deadline, chainDeadline, fmt.Sprintf("%d hops handled", handled), func(l [][]deliveryLine) bool {
		count := 0
		for _, lines := range l {
			for _, x := range lines {
				if x.Kind == "hop" && !x.Duplicate && x.Failed == "" {
					count++
				}
			}
		}
		kill.proc = chainVictim(l, hops, kill.joiner)
		return count >= handled && kill.proc >= 0
	})
	if err != nil {
		kill.proc = -1
		return kill, children, err
	}
	children[kill.proc].kill()
	kill.at = time.Now().UnixNano()
	return kill, children, nil
}

// chainVictim returns the process to kill, by its logs so far, of chains of hops hops: of
// those but joiner, the one that committed a hop of the most chains whose last hop no process
// has handled, of two such the one that began such a hop the latest; -1 when none did.
func chainVictim(logs [][]deliveryLine, hops, joiner int) int {
	done := map[int]bool{}
	for _, lines := range logs {
		for _, x := range lines {
			if x.Kind == "hop" && x.Hop == hops && x.Failed == "" {
				done[x.Chain] = true
			}
		}
	}
	victim, most, latest := -1, 0, int64(0)
	for i, lines := range logs {
		if i == joiner {
			continue
		}
		running, last := map[int]bool{}, int64(0)
		for _, x := range lines {
			if x.Kind == "hop" && !x.Duplicate && x.Failed == "" && !done[x.Chain] {
				running[x.Chain] = true
				last = max(last, x.Start)
			}
		}
		if n := len(running); n > 0 && (n > most || n == most && last > latest) {
			victim, most, latest = i, n, last
		}
	}
	return victim
}

// chainPairs returns the ids of the executions of chains 1…chains (pairs[c]; pairs[0] is
// unused), drawn from seed: a sends the seed to b, and the hops go back and forth between
// them, so b handles the even hops and a the odd ones. The ids end in random digits, so
// that a pair is in one relay process's partitions or in two as chance has it: ids that
// differ only in one letter, "chain1-a" and "chain1-b", hash to partitions that differ
// modulo 4 (FNV-1a keeps the low bits of every byte apart), and relays that shared the
// partitions by their number modulo 2 or 4 (the rule before rendezvous hashing) would never
// hold both.
//
// Placed, each b is named into its a's partition among partitions (execstore.PlaceWith), as
// an engine keeps a saga's executions together.
func chainPairs(seed uint64, chains int, placed bool, partitions int) ([][2]string, error) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a1))
	pairs := make([][2]string, chains+1)
	for c := 1; c <= chains; c++ {
		pairs[c] = [2]string{fmt.Sprintf("chain%d-a-%08x", c, rng.Uint32()), fmt.Sprintf("chain%d-b-%08x", c, rng.Uint32())}
		if placed {
			b, err := execstore.PlaceWith(pairs[c][1], pairs[c][0], partitions)
			if err != nil {
				return nil, err
			}
			pairs[c][1] = b
		}
	}
	return pairs, nil
}

// chainRuns are the runs of the chains of hops hops: by 1, 2 and 4 relay processes, the
// pairs spread as their ids fall, then placed together; then by 4 with faults, spread and
// placed.
func chainRuns(hops int) []chainRun {
	var runs []chainRun
	for _, placed := range []bool{false, true} {
		for _, n := range deliveryProcesses {
			runs = append(runs, chainRun{processes: n, placed: placed, hops: hops})
		}
	}
	for _, placed := range []bool{false, true} {
		runs = append(runs, chainRun{processes: 4, placed: placed, faults: true, hops: hops})
	}
	return runs
}

// createChains creates the executions of pairs, 16 commits at once, and returns each
// chain's a as created (senders[c]).
func createChains(ctx context.Context, store execstore.Store, pairs [][2]string) ([]*execstore.Execution, error) {
	senders := make([]*execstore.Execution, len(pairs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for c := 1; c < len(pairs); c++ {
		for i, id := range pairs[c] {
			g.Go(func() error {
				exe := &execstore.Execution{ID: id, DefinitionID: "chain", Status: execstore.Running, Data: []byte(`{"hops":[]}`)}
				_, err := store.Commit(gctx, exe, execstore.Commit{})
				if i == 0 {
					senders[c] = exe
				}
				return err
			})
		}
	}
	return senders, g.Wait()
}

// seedChains commits each chain's seed, hop 0 from its a (senders[c]) to its b, 16 commits
// at once, and returns when each commit returned (Unix nanoseconds), by chain.
func seedChains(ctx context.Context, store execstore.Store, pairs [][2]string, senders []*execstore.Execution, hops int) (map[int]int64, error) {
	returned := make([]int64, len(senders))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for c := 1; c < len(senders); c++ {
		g.Go(func() error {
			_, err := store.Commit(gctx, senders[c], execstore.Commit{Emits: []execstore.Emit{
				{TargetID: pairs[c][1], Event: chainEventBytes(chainEvent{Chain: c, Hop: 0, Of: hops})}}})
			returned[c] = time.Now().UnixNano()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(senders))
	for c := 1; c < len(senders); c++ {
		out[c] = returned[c]
	}
	return out, nil
}

// chainStates returns the hops each chain's executions' stored snapshots say they handled,
// a's then b's, by chain.
func chainStates(ctx context.Context, store execstore.Store, pairs [][2]string) (map[int][2][]int, error) {
	out := map[int][2][]int{}
	for c := 1; c < len(pairs); c++ {
		var hops [2][]int
		for i, id := range pairs[c] {
			exe, err := store.Load(ctx, id)
			if err != nil {
				return nil, err
			}
			var s chainSnapshot
			if err := json.Unmarshal(exe.Data, &s); err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			hops[i] = s.Hops
		}
		out[c] = hops
	}
	return out, nil
}

// chainHandling is one "hop" line of a relay process's log, with the process's index.
type chainHandling struct {
	deliveryLine
	proc int
}

// hopKey names one hop of one chain.
type hopKey struct{ chain, hop int }

// chainHandlings returns the "hop" lines of the logs by hop, each hop's in the order of
// their starts.
func chainHandlings(logs [][]deliveryLine) map[hopKey][]chainHandling {
	out := map[hopKey][]chainHandling{}
	for i, lines := range logs {
		for _, x := range lines {
			if x.Kind == "hop" {
				k := hopKey{x.Chain, x.Hop}
				out[k] = append(out[k], chainHandling{x, i})
			}
		}
	}
	for _, hs := range out {
		slices.SortStableFunc(hs, func(a, b chainHandling) int { return cmp.Compare(a.Start, b.Start) })
	}
	return out
}

// handled returns the first handling of hs that committed: neither a duplicate nor failed.
func handled(hs []chainHandling) (chainHandling, bool) {
	for _, h := range hs {
		if !h.Duplicate && h.Failed == "" {
			return h, true
		}
	}
	return chainHandling{}, false
}

// chainsDone reports whether the logs show every hop 0…hops of chains 1…chains handed to a
// handler that did not fail, and every entry handed to such a handler acked, but in the log
// of victim (a killed process; -1: none), which may have died between an ack and its line.
// Whether each was handled once is for the checks.
func chainsDone(logs [][]deliveryLine, chains, hops, victim int) bool {
	by := chainHandlings(logs)
	for c := 1; c <= chains; c++ {
		for k := 0; k <= hops; k++ {
			if !slices.ContainsFunc(by[hopKey{c, k}], func(h chainHandling) bool { return h.Failed == "" }) {
				return false
			}
		}
	}
	acked := map[entryKey]bool{}
	for _, lines := range logs {
		for _, x := range lines {
			if x.Kind == "ack" {
				acked[entryKey{x.Source, x.Seq}] = true
			}
		}
	}
	for _, hs := range by {
		for _, h := range hs {
			if h.Failed == "" && h.proc != victim && !acked[entryKey{h.Source, h.Seq}] {
				return false
			}
		}
	}
	return true
}

// chainMeasure is what a run's logs say of its hops' latencies.
type chainMeasure struct {
	// hops are the latencies of hops 1…hops of every chain: from the return of the commit
	// that emitted the hop (its emitter's handler, logged by the emitting process) to the
	// start of its first handling (logged by the receiving process). Across and within split
	// them by whether the two processes differ.
	hops, across, within []time.Duration
	// seeds are the latencies of the seeds (hop 0): from the bench's commit to the first
	// handler's start.
	seeds []time.Duration
	// chainTimes are each chain's time from hop 1's emitting commit returned to the end of
	// its last hop's handler: the time of its hops, handlers included.
	chainTimes []time.Duration
	// entries are the outbox entries handed to a handler, handlerCalls the calls, of which
	// duplicates found their event processed and failed failed.
	entries, handlerCalls, duplicates, failed int
}

// meanChainTime is the mean of the chains' times; 0 when none was measured.
func (m chainMeasure) meanChainTime() time.Duration {
	if len(m.chainTimes) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range m.chainTimes {
		sum += d
	}
	return sum / time.Duration(len(m.chainTimes))
}

// measureChains returns the latencies the logs give for chains 1…chains of hops hops, whose
// seeds' commits returned at seeds (Unix nanoseconds, by chain). A hop's first handling is
// its first handler call, failed or not; a hop with none, or whose emitter's commit return
// is unknown (no call that committed it saw it return), is left out. A hop may measure below
// zero: an entry can be handed over before its commit's return is logged.
func measureChains(logs [][]deliveryLine, seeds map[int]int64, chains, hops int) chainMeasure {
	var m chainMeasure
	by := chainHandlings(logs)
	entries := map[entryKey]bool{}
	for _, hs := range by {
		for _, h := range hs {
			m.handlerCalls++
			switch {
			case h.Failed != "":
				m.failed++
			case h.Duplicate:
				m.duplicates++
			}
			entries[entryKey{h.Source, h.Seq}] = true
		}
	}
	m.entries = len(entries)
	for c := 1; c <= chains; c++ {
		if hs := by[hopKey{c, 0}]; len(hs) > 0 && seeds[c] > 0 {
			m.seeds = append(m.seeds, time.Duration(hs[0].Start-seeds[c]))
		}
		for k := 1; k <= hops; k++ {
			hs := by[hopKey{c, k}]
			from, ok := handled(by[hopKey{c, k - 1}])
			if len(hs) == 0 || !ok || from.Emitted == 0 {
				continue
			}
			d := time.Duration(hs[0].Start - from.Emitted)
			m.hops = append(m.hops, d)
			if hs[0].proc != from.proc {
				m.across = append(m.across, d)
			} else {
				m.within = append(m.within, d)
			}
		}
		first, okFirst := handled(by[hopKey{c, 0}])
		last, okLast := handled(by[hopKey{c, hops}])
		if okFirst && okLast && first.Emitted > 0 {
			m.chainTimes = append(m.chainTimes, time.Duration(last.End-first.Emitted))
		}
	}
	return m
}

// chainChecks are a chain run's end-of-run checks: the outbox empty at the end; every hop
// handled by a call that did not fail; every hop committed seen committed by a handler, or
// its handler failed (a store that applied a commit and told its handler otherwise fails
// it), or, in a run with faults, every call began after the kill (the killed process may
// have committed it and died before its line); no hop handled nor emitted twice; each
// chain's withheld hop delivered again and found processed; the hops of each chain handled
// in order (no call of a hop began before the call that committed the hop before it), by
// the logs and by what its executions' snapshots hold; with faults, that they came
// mid-chain; and the relay processes stopped cleanly, but a killed one. stored is the hops
// each chain's a and b hold in their snapshots, by chain.
func chainChecks(logs [][]deliveryLine, stored map[int][2][]int, chains, hops int, pending []execstore.OutboxEntry,
	kill chainKill, waitErr, stopErr error) []check {
	var out []check
	out = append(out, outboxEmpty(pending, waitErr))

	by := chainHandlings(logs)
	var missing, unseen, doubled, notRedelivered, disordered []string
	for ch := 1; ch <= chains; ch++ {
		prev := int64(0) // when the call that committed the latest hop logged began
		for k := 0; k <= hops; k++ {
			hs := by[hopKey{ch, k}]
			name := fmt.Sprintf("chain %d hop %d", ch, k)
			if !slices.ContainsFunc(hs, func(h chainHandling) bool { return h.Failed == "" }) {
				missing = append(missing, name)
				continue
			}
			if hs[0].Start <= prev {
				disordered = append(disordered, fmt.Sprintf("%s started before hop %d", name, k-1))
			}
			first, ok := handled(hs)
			if !ok {
				// No call saw its commit return: one whose commit was sent must have failed
				// (its outcome unknown to it), or the store told a handler whose commit it
				// applied that it was refused, or the killed process committed it.
				afterKill := kill.proc >= 0 && !slices.ContainsFunc(hs, func(h chainHandling) bool { return h.Start <= kill.at })
				if !afterKill && !slices.ContainsFunc(hs, func(h chainHandling) bool { return h.Failed != "" }) {
					told := ""
					if hs[0].Refused != "" {
						told = fmt.Sprintf(", a commit told %q", hs[0].Refused)
					}
					unseen = append(unseen, fmt.Sprintf("%s (every call found it processed%s)", name, told))
				}
				continue
			}
			prev = first.Start
			firsts, entries := 0, map[entryKey]bool{}
			for _, h := range hs {
				if !h.Duplicate && h.Failed == "" {
					firsts++
				}
				entries[entryKey{h.Source, h.Seq}] = true
			}
			if firsts > 1 || len(entries) > 1 {
				doubled = append(doubled, fmt.Sprintf("%s (%d handlings, %d entries)", name, firsts, len(entries)))
			}
			if k == hops-1 && !slices.ContainsFunc(hs, func(h chainHandling) bool { return h.Duplicate && h.Start > first.Start }) {
				notRedelivered = append(notRedelivered, name)
			}
		}
		var want [2][]int // a handles the odd hops, b the even ones
		for k := 0; k <= hops; k++ {
			want[1-k%2] = append(want[1-k%2], k)
		}
		for i, name := range []string{"a", "b"} {
			if got := stored[ch][i]; !slices.Equal(got, want[i]) {
				disordered = append(disordered, fmt.Sprintf("chain %d's %s holds hops %v, not %v", ch, name, got, want[i]))
			}
		}
	}
	slices.Sort(disordered)
	for _, x := range []struct {
		name     string
		offended []string
	}{
		{"every hop handled", missing},
		{"every hop committed seen committed, or its handler failed", unseen},
		{"no hop handled or emitted twice", doubled},
		{"each withheld hop delivered again and found processed", notRedelivered},
		{"each chain's hops handled in order", disordered},
	} {
		c := check{name: x.name, ok: len(x.offended) == 0}
		if !c.ok {
			c.detail = fmt.Sprintf("%d: %s", len(x.offended), listed(x.offended))
		}
		out = append(out, c)
	}
	if kill.joiner >= 0 {
		out = append(out, faultsMidChain(logs, by, kill))
	}
	c := check{name: "relay processes stopped cleanly", ok: stopErr == nil}
	if !c.ok {
		c.detail = stopErr.Error()
	}
	return append(out, c)
}

// faultsMidChain checks that a run's faults came while its chains ran: the joining process
// took a partition that a live process had handed over (released before it was told to
// stop) before the last hop began, and a chain whose hop the killed process committed went
// on in another process after the kill. (Whether the joiner then handled a hop depends on
// whether its partitions hold a chain's execution: placed, 16 chains are in at most 16
// partitions of 64.)
func faultsMidChain(logs [][]deliveryLine, by map[hopKey][]chainHandling, kill chainKill) check {
	handedOver := map[int64]bool{}
	for i, lines := range logs {
		if i == kill.joiner {
			continue
		}
		for _, x := range lines {
			if x.Kind == "stopping" {
				break
			}
			if x.Kind == "released" {
				handedOver[x.Seq] = true
			}
		}
	}
	lastStart := int64(0)
	for _, hs := range by {
		for _, h := range hs {
			lastStart = max(lastStart, h.Start)
		}
	}
	tookHandedOver := false
	for _, x := range logs[kill.joiner] {
		tookHandedOver = tookHandedOver || x.Kind == "took" && handedOver[x.Seq] && x.End < lastStart
	}
	victimChains := map[int]bool{}
	if kill.proc >= 0 {
		for _, x := range logs[kill.proc] {
			if x.Kind == "hop" && !x.Duplicate && x.Failed == "" {
				victimChains[x.Chain] = true
			}
		}
	}
	takenOver := false
	for k, hs := range by {
		if victimChains[k.chain] {
			if first, ok := handled(hs); ok && first.proc != kill.proc && first.Start > kill.at {
				takenOver = true
			}
		}
	}
	c := check{name: "the join and the kill came mid-chain", ok: tookHandedOver && takenOver}
	if !c.ok {
		c.detail = fmt.Sprintf("joining process took a partition handed over before the last hop: %v; a chain of the killed process went on elsewhere: %v",
			tookHandedOver, takenOver)
	}
	return c
}

// lastStatsSum sums HandedOver, Targeted and Woken over the last "stats" line of each log.
func lastStatsSum(logs [][]deliveryLine) deliveryLine {
	var sum deliveryLine
	for _, lines := range logs {
		for i := len(lines) - 1; i >= 0; i-- {
			if l := lines[i]; l.Kind == "stats" {
				sum.HandedOver += l.HandedOver
				sum.Targeted += l.Targeted
				sum.Woken += l.Woken
				break
			}
		}
	}
	return sum
}
