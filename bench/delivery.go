package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/cpuhog"
	"github.com/execstore/execstore/server"
)

// The delivery section: a backlog committed, then delivered by relay processes.
const (
	defaultDeliveryEntries = 1000
	// embeddedDeliveryEntries is the backlog on the embedded server, unless -delivery names
	// one: it runs one write at a time and reads every document per scan, so it delivers a
	// few dozen entries a second, whatever the processes.
	embeddedDeliveryEntries = 150
	deliveryExecutions      = 500              // the backlog's sources, each one commit of entries: few to a document, so that acks seldom wait on one row
	deliveryDeadline        = 60 * time.Second // bounds one delivery of the backlog
	deliveryLook            = 20 * time.Millisecond
	// hogsBound bounds the CPU hogs of the runs under load: they end by themselves then,
	// whatever the bench does, and it kills them once those runs are done.
	hogsBound = 5 * time.Minute
)

// deliveryProcesses are the numbers of relay processes that deliver the backlog in turn.
var deliveryProcesses = []int{1, 2, 4}

// relayChild is a relay process of the delivery section, started from the bench binary.
type relayChild struct {
	name, log string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	output    bytes.Buffer
	done      chan struct{}
	err       error
}

// startRelayChild starts the bench binary again as relay process name, delivering database
// db of the server at uri with the handler of workload (workloadChain's, or "" for one that
// waits wait), and logging to a file in dir. It dies with this process: its standard input
// closes then, on which it stops, and on Linux the kernel kills it.
func startRelayChild(name, uri, db, dir string, wait time.Duration, workload string) (*relayChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &relayChild{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	c.cmd = exec.Command(exe)
	c.cmd.Env = append(os.Environ(), envRelayProcess+"="+name, envRelayURI+"="+uri, envRelayDB+"="+db, envRelayLog+"="+c.log, envRelayWait+"="+wait.String(), envRelayWorkload+"="+workload)
	c.cmd.Stdout, c.cmd.Stderr = &c.output, &c.output
	dieWithParent(c.cmd)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop closes the child's standard input, on which it stops cleanly, and waits for it.
func (c *relayChild) stop() error {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(cleanupTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("relay process %s did not stop within %v: killed", c.name, cleanupTimeout)
	}
	if c.err != nil {
		return fmt.Errorf("relay process %s: %w: %s", c.name, c.err, bytes.TrimSpace(c.output.Bytes()))
	}
	return nil
}

// kill kills the child with SIGKILL and waits for it.
func (c *relayChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// lines returns the child's log as far as it is written (whole lines).
func (c *relayChild) lines() ([]deliveryLine, error) {
	b, err := os.ReadFile(c.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []deliveryLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l deliveryLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("relay process %s's log: %w", c.name, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// childLogs returns each child's log as far as it is written, in the children's order.
func childLogs(children []*relayChild) ([][]deliveryLine, error) {
	out := make([][]deliveryLine, len(children))
	for i, c := range children {
		var err error
		if out[i], err = c.lines(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitLogs reads the children's logs every deliveryLook until done says they show what
// it waits for, or until deadline: then it fails, naming what and bound.
func waitLogs(ctx context.Context, children []*relayChild, deadline time.Time, bound time.Duration, what string,
	done func([][]deliveryLine) bool) error {
	for {
		l, err := childLogs(children)
		if err != nil {
			return err
		}
		if done(l) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(deliveryLook):
		}
	}
}

// deliveryRun is what one delivery of the backlog measured.
type deliveryRun struct {
	processes int
	entries   int
	rate      float64       // entries per second, from the first handler's start to the last ack
	wall      time.Duration // the same span
	takeOver  time.Duration // with a kill: until the killed process's share was delivered again
	hogs      int           // the CPU hogs that ran meanwhile: 0, idle
	procs     []procLeases  // each relay process's leases, in start order
	cost      deliveryCost
	checks    []check
}

// procLeases is what one relay process's Stats said of its leases once it stopped. A killed
// process said nothing.
type procLeases struct {
	name                           string
	killed                         bool
	leasesLost, takeOvers, reTakes int64
	skipped                        int64 // the items its relay's scans returned while in flight (Stats.Skipped)
}

// runDelivery measures the delivery section: the backlog delivered by 1, 2 and 4 relay
// processes, then by 2 of which one is killed mid-delivery (unless -delivery is 0); then the
// chains (-chain) by 1, 2 and 4 relay processes; then the backlog's runs under load (-load).
func (e *environment) runDelivery(ctx context.Context, cfg config, stamp string) (*deliveryReport, error) {
	if e.embedded != nil && !cfg.deliverySet {
		cfg.deliveryEntries = embeddedDeliveryEntries
	}
	rep := &deliveryReport{entries: cfg.deliveryEntries, wait: cfg.deliveryWait, server: e.description}
	if cfg.deliveryEntries > 0 {
		if err := e.runBacklog(ctx, cfg, stamp, rep); err != nil {
			return nil, err
		}
	}
	if cfg.chains > 0 {
		var err error
		if rep.chain, err = e.runChains(ctx, cfg, stamp); err != nil {
			return nil, err
		}
	}
	if cfg.deliveryEntries > 0 && (len(cfg.deliveryLoad) > 0 || cfg.loadTakeOver) {
		if err := e.runBacklogUnderLoad(ctx, cfg, stamp, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// backlogRun delivers the backlog once, on a database of its own, by n relay processes
// (killing one of them when kill is set) while hogs CPU hogs run, and drops the database
// unless -keep.
func (e *environment) backlogRun(ctx context.Context, cfg config, stamp string, i, n int, kill bool, hogs int) (deliveryRun, error) {
	cpu, err := parseServerPIDs(os.Getenv(envServerPIDs))
	if err != nil {
		return deliveryRun{}, err
	}
	db := fmt.Sprintf("bench_%s_%d_delivery_%d_%d", stamp, os.Getpid(), n, i)
	run, err := e.deliver(ctx, cfg, db, n, kill, cpu)
	run.hogs = hogs
	if !cfg.keep {
		e.dropAtEnd(db)
	}
	if err != nil {
		under := ""
		if hogs > 0 {
			under = " under load"
		}
		return run, fmt.Errorf("delivery by %d relay processes%s: %w", n, under, err)
	}
	return run, nil
}

// runBacklog delivers the backlog by 1, 2 and 4 relay processes, then by 2 of which one is
// killed, into rep.
func (e *environment) runBacklog(ctx context.Context, cfg config, stamp string, rep *deliveryReport) error {
	fmt.Fprintf(os.Stderr, "bench: delivery by 1, 2 and 4 relay processes, then a take-over\n")
	for i, n := range append(deliveryProcesses, 2) {
		kill := i == len(deliveryProcesses)
		run, err := e.backlogRun(ctx, cfg, stamp, i, n, kill, 0)
		if err != nil {
			return err
		}
		if kill {
			rep.takeOver = &run
		} else {
			rep.runs = append(rep.runs, run)
		}
	}
	return nil
}

// runBacklogUnderLoad delivers the backlog again while CPU hogs keep every core busy, by the
// relay processes of -load, then in a take-over when -load says so, into rep.
func (e *environment) runBacklogUnderLoad(ctx context.Context, cfg config, stamp string, rep *deliveryReport) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	hogs, err := cpuhog.Start(0, hogsBound, func() *exec.Cmd { return exec.Command(exe) })
	if err != nil {
		return err
	}
	defer hogs.Stop()
	fmt.Fprintf(os.Stderr, "bench: delivery again under load (%d CPU hogs): by %v relay processes", hogs.Len(), cfg.deliveryLoad)
	if cfg.loadTakeOver {
		fmt.Fprintf(os.Stderr, ", then a take-over")
	}
	fmt.Fprintln(os.Stderr)
	i := len(deliveryProcesses) + 1
	for _, n := range cfg.deliveryLoad {
		run, err := e.backlogRun(ctx, cfg, stamp, i, n, false, hogs.Len())
		if err != nil {
			return err
		}
		rep.loaded = append(rep.loaded, run)
		i++
	}
	if cfg.loadTakeOver {
		run, err := e.backlogRun(ctx, cfg, stamp, i, 2, true, hogs.Len())
		if err != nil {
			return err
		}
		rep.loadedTakeOver = &run
	}
	return nil
}

// startRelays opens the bench's store on db and starts n relay processes of workload on it,
// logging to a directory named after kind ("bench-<kind>-…" in the temporary directory).
// join starts one more, named name, beside them. stop kills those still running, keeps
// their logs with -keep (and says where) or removes them, and closes the store; call it
// however startRelays ended.
func (e *environment) startRelays(ctx context.Context, cfg config, db, kind string, n int, workload string) (
	store *aio.Store, children []*relayChild, join func(name string) (*relayChild, error), stop func() error, err error) {
	var dir string
	join = func(name string) (*relayChild, error) {
		c, err := startRelayChild(name, e.uri, db, dir, cfg.deliveryWait, workload)
		if err == nil {
			children = append(children, c) // for stop
		}
		return c, err
	}
	stop = func() error {
		for _, c := range children {
			select {
			case <-c.done:
			default:
				c.kill()
			}
		}
		if dir != "" && cfg.keep {
			fmt.Fprintf(os.Stderr, "bench: the relay processes' logs of %s are in %s\n", db, dir)
		} else if dir != "" {
			_ = os.RemoveAll(dir)
		}
		if store == nil {
			return nil
		}
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		return store.Close(cctx)
	}
	if store, err = aio.Open(ctx, e.uri, aio.Options{Connection: server.Connection{Database: db}}); err != nil {
		return nil, nil, join, stop, err
	}
	if dir, err = os.MkdirTemp("", "bench-"+kind+"-*"); err != nil {
		return store, nil, join, stop, err
	}
	for i := range n {
		if _, err := join(fmt.Sprintf("r%d", i+1)); err != nil {
			return store, slices.Clone(children), join, stop, err
		}
	}
	return store, slices.Clone(children), join, stop, nil
}

// drained reads store until it has no pending entry, every 5×deliveryLook (it is read whole:
// rarely). Past deadline it stops, with waitErr saying how many are left after bound; err is
// a read that failed.
func drained(ctx context.Context, store execstore.Store, deadline time.Time, bound time.Duration) (waitErr, err error) {
	for {
		pending, err := store.PendingOutbox(ctx, 0)
		if err != nil || len(pending) == 0 {
			return nil, err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d entries still pending after %v", len(pending), bound), nil
		}
		time.Sleep(5 * deliveryLook)
	}
}

// stopRelays stops the relay processes cleanly, all but skip (-1: none; a killed one), and
// returns what their stops said. When the run stalled and -keep is set, each first writes its
// goroutines' stacks beside its log.
func stopRelays(cfg config, children []*relayChild, skip int, stalled bool) error {
	if stalled && cfg.keep {
		for i, c := range children {
			if i != skip {
				askForStacks(c.cmd)
			}
		}
		time.Sleep(time.Second)
	}
	var stopErr error
	for i, c := range children {
		if i != skip {
			stopErr = errors.Join(stopErr, c.stop())
		}
	}
	return stopErr
}

// deliver commits the backlog to db, has n relay processes deliver it (killing one of them
// mid-delivery when kill is set), checks that nothing was lost and measures what it cost,
// the CPU of the server's processes cpu included.
func (e *environment) deliver(ctx context.Context, cfg config, db string, n int, kill bool, cpu serverProcesses) (run deliveryRun, err error) {
	run = deliveryRun{processes: n, entries: cfg.deliveryEntries}
	store, children, _, stop, err := e.startRelays(ctx, cfg, db, "delivery", n, "")
	defer func() { err = errors.Join(err, stop()) }()
	if err != nil {
		return run, err
	}
	deadline := time.Now().Add(deliveryDeadline)
	wait := func(what string, done func([][]deliveryLine) bool) error {
		return waitLogs(ctx, children, deadline, deliveryDeadline, what, done)
	}

	// The relays share the partitions first: each holds its share (n of them at most one
	// apart, every partition held once), so that the rate is the steady state's, not that of
	// one process holding everything until the others join.
	if err := wait("the relay processes sharing the partitions", func(l [][]deliveryLine) bool {
		return balanced(l, store.Partitions())
	}); err != nil {
		return run, err
	}
	committed, err := commitBacklog(ctx, store, cfg.deliveryEntries)
	if err != nil {
		return run, err
	}
	endCPU := cpu.measure()
	windowFrom := time.Now()
	deadline = time.Now().Add(deliveryDeadline) // the delivery's own bound

	victim := -1
	var killedAt time.Time
	if kill {
		// The victim has handed out a sixth of the backlog, the last entry just now.
		err := wait("a relay process delivering", func(l [][]deliveryLine) bool {
			for i, lines := range l {
				d, last := 0, int64(0)
				for _, x := range lines {
					if x.Kind == "deliver" {
						d++
						last = x.End
					}
				}
				if d >= cfg.deliveryEntries/6 && time.Since(time.Unix(0, last)) < 100*time.Millisecond {
					victim = i
					return true
				}
			}
			return false
		})
		if err != nil {
			return run, err
		}
		children[victim].kill()
		killedAt = time.Now()
	}
	acked := func(l [][]deliveryLine) map[entryKey]bool {
		a := map[entryKey]bool{}
		for _, lines := range l {
			for _, x := range lines {
				if x.Kind == "ack" {
					a[entryKey{x.Source, x.Seq}] = true
				}
			}
		}
		return a
	}
	// Every entry's ack is logged, but those of the killed process: it may have died between
	// an ack and its line, or with acks the server applied after. The store says the rest.
	waitErr := wait("every entry acked", func(l [][]deliveryLine) bool {
		a := acked(l)
		byVictim := map[entryKey]bool{}
		if victim >= 0 {
			for _, x := range l[victim] {
				byVictim[entryKey{x.Source, x.Seq}] = x.Kind == "deliver"
			}
		}
		for _, k := range committed {
			if !a[k] && !byVictim[k] {
				return false
			}
		}
		return true
	})
	serverCPU := endCPU()
	windowTo := time.Now()
	if waitErr == nil {
		if waitErr, err = drained(ctx, store, deadline, deliveryDeadline); err != nil {
			return run, err
		}
	}
	stopErr := stopRelays(cfg, children, victim, waitErr != nil)
	l, err := childLogs(children)
	if err != nil {
		return run, err
	}
	run.rate, run.wall = deliveryRate(l)
	run.cost = costOf(l, windowFrom.UnixNano(), windowTo.UnixNano())
	run.cost.server = serverCPU
	if kill {
		run.takeOver = takeOverTime(l, victim, killedAt, store)
	}
	pending, err := store.PendingOutbox(ctx, 0)
	if err != nil {
		return run, err
	}
	for i, c := range children {
		p := procLeases{name: c.name, killed: i == victim}
		for _, x := range l[i] {
			if x.Kind == "stats" {
				p.leasesLost, p.takeOvers, p.reTakes, p.skipped = x.LeasesLost, x.TakeOvers, x.ReTakes, x.Skipped
			}
		}
		run.procs = append(run.procs, p)
	}
	run.checks = deliveryChecks(committed, l, pending, waitErr, stopErr)
	return run, nil
}

// leasesKept judges whether no relay process that lived to the end lost a lease: a live
// relay keeps its leases until they run out and renews them while they hold. It is a goal,
// reported: on the embedded server, whose one write slot serves the lease store too, a
// renewal waits behind the data writes and short leases run out (bench/README.md).
func leasesKept(procs []procLeases) check {
	c := check{name: "no lease lost by a live relay process", ok: true}
	for _, p := range procs {
		if !p.killed && p.leasesLost > 0 {
			c.ok = false
			if c.detail != "" {
				c.detail += ", "
			}
			c.detail += fmt.Sprintf("%s lost %d", p.name, p.leasesLost)
		}
	}
	return c
}

// balanced reports whether the processes' logs show every partition of n held by one of
// them, and their shares at most one apart.
func balanced(logs [][]deliveryLine, n int) bool {
	total, least, most := 0, n, 0
	for _, lines := range logs {
		held := map[int64]bool{}
		for _, x := range lines {
			switch x.Kind {
			case "took":
				held[x.Seq] = true
			case "released":
				delete(held, x.Seq)
			}
		}
		total += len(held)
		least, most = min(least, len(held)), max(most, len(held))
	}
	return total == n && most-least <= 1
}

// commitBacklog commits entries outbox entries from up to deliveryExecutions executions, one
// creating commit each, 32 at once, to targets spread over them, and returns them, each
// source's in commit order.
func commitBacklog(ctx context.Context, store execstore.Store, entries int) ([]entryKey, error) {
	per := (entries + deliveryExecutions - 1) / deliveryExecutions
	execs := (entries + per - 1) / per
	bySource := make([][]entryKey, execs)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range execs {
		g.Go(func() error {
			exe := &execstore.Execution{ID: fmt.Sprintf("d%03d", i), DefinitionID: "delivery", Status: execstore.Running}
			var c execstore.Commit
			for k := range min(per, entries-i*per) {
				c.Emits = append(c.Emits, execstore.Emit{TargetID: fmt.Sprintf("d%03d", (i*7+k)%execs), Event: []byte(fmt.Sprintf("e%d/%d", i, k))})
			}
			seqs, err := store.Commit(gctx, exe, c)
			for _, seq := range seqs {
				bySource[i] = append(bySource[i], entryKey{exe.ID, seq})
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []entryKey
	for _, keys := range bySource {
		out = append(out, keys...)
	}
	return out, nil
}

// deliveryRate returns the entries acked per second from the first handler's start to the
// last ack, and that span.
func deliveryRate(logs [][]deliveryLine) (float64, time.Duration) {
	var first, last int64
	acked := map[entryKey]bool{}
	for _, lines := range logs {
		for _, x := range lines {
			switch x.Kind {
			case "deliver":
				if first == 0 || x.Start < first {
					first = x.Start
				}
			case "ack":
				acked[entryKey{x.Source, x.Seq}] = true
				last = max(last, x.End)
			}
		}
	}
	span := time.Duration(last - first)
	if span <= 0 {
		return 0, 0
	}
	return float64(len(acked)) / span.Seconds(), span
}

// takeOverTime returns how long after killedAt another process first handed out an entry of
// the killed process's share: of the partitions it handed entries out of, or of every
// partition when the store is not partitioned. It is 0 when none was handed out after.
func takeOverTime(logs [][]deliveryLine, victim int, killedAt time.Time, store execstore.Store) time.Duration {
	partitionOf := func(string) int { return 0 }
	if p, ok := store.(execstore.Partitioned); ok {
		n := p.Partitions()
		partitionOf = func(id string) int { return execstore.PartitionOf(id, n) }
	}
	share := map[int]bool{}
	for _, x := range logs[victim] {
		if x.Kind == "deliver" {
			share[partitionOf(x.Source)] = true
		}
	}
	var first int64
	for i, lines := range logs {
		for _, x := range lines {
			if i != victim && x.Kind == "deliver" && x.Start > killedAt.UnixNano() && share[partitionOf(x.Source)] &&
				(first == 0 || x.Start < first) {
				first = x.Start
			}
		}
	}
	if first == 0 {
		return 0
	}
	return time.Duration(first - killedAt.UnixNano())
}

// outboxEmpty is the check that nothing was left pending at the end of a run: pending is
// what the store still held, waitErr why the wait for it ended, if it ended early.
func outboxEmpty(pending []execstore.OutboxEntry, waitErr error) check {
	c := check{name: "outbox empty at the end", ok: len(pending) == 0 && waitErr == nil}
	if !c.ok {
		c.detail = fmt.Sprintf("%d entries pending", len(pending))
		if waitErr != nil {
			c.detail += fmt.Sprintf(" (%v)", waitErr)
		}
	}
	return c
}

// deliveryChecks are a delivery's end-of-run checks: the outbox empty, every entry delivered
// at least once, every ack after a handler of the same process returned nil for the entry,
// and the processes (but a killed one) stopped cleanly.
func deliveryChecks(committed []entryKey, logs [][]deliveryLine, pending []execstore.OutboxEntry, waitErr, stopErr error) []check {
	var out []check
	out = append(out, outboxEmpty(pending, waitErr))
	delivered := map[entryKey]bool{}
	early := 0
	for _, lines := range logs {
		handled := map[entryKey]int64{}
		for _, x := range lines {
			k := entryKey{x.Source, x.Seq}
			switch x.Kind {
			case "deliver":
				delivered[k] = true
				if _, ok := handled[k]; !ok {
					handled[k] = x.End
				}
			case "ack":
				if at, ok := handled[k]; !ok || at > x.End {
					early++
				}
			}
		}
	}
	missing := 0
	for _, k := range committed {
		if !delivered[k] {
			missing++
		}
	}
	c := check{name: "every entry delivered at least once", ok: missing == 0}
	if !c.ok {
		c.detail = fmt.Sprintf("%d of %d never handed to a handler", missing, len(committed))
	}
	out = append(out, c)
	c = check{name: "acked after its handler returned nil", ok: early == 0}
	if !c.ok {
		c.detail = fmt.Sprintf("%d acks with no handler's nil before them in their process", early)
	}
	out = append(out, c)
	c = check{name: "relay processes stopped cleanly", ok: stopErr == nil}
	if !c.ok {
		c.detail = stopErr.Error()
	}
	return append(out, c)
}
