package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// The environment the bench binary is started with as a relay process of the delivery
// section. envRelayProcess names the process and makes main run deliveryProcess.
const (
	envRelayProcess = "EXECSTORE_BENCH_RELAY_PROCESS"
	envRelayURI     = "EXECSTORE_BENCH_RELAY_URI"
	envRelayDB      = "EXECSTORE_BENCH_RELAY_DB"
	envRelayLog     = "EXECSTORE_BENCH_RELAY_LOG"
	envRelayWait    = "EXECSTORE_BENCH_RELAY_WAIT" // the handler's wait, a time.Duration
	// envRelayWorkload is the process's handler: workloadChain for the chain workload's
	// (chainHandler), else the backlog's, which waits.
	envRelayWorkload = "EXECSTORE_BENCH_RELAY_WORKLOAD"
)

// How every relay process of the delivery section runs its Relay.
const (
	deliveryLease = 2 * time.Second      // LeaseDuration: a dead process's share is taken over within 2.5s
	deliveryLanes = 1                    // few enough that one process is bound by its lanes, and 4 processes not by the server
	deliveryWait  = 8 * time.Millisecond // -delivery-wait's default: a handler's wait, as a downstream call's
	// deliveryPoll is relay's default PollInterval: no commit of the process wakes it, it
	// polls. At 100ms the scans of the embedded server, each reading every execution, bound
	// the delivery: 1s delivered more (1 process 66.8 events/s against 47.9, 2 processes
	// 87.9 against 38.3), and under load no live process lost a lease (one lost 32 at 100ms).
	deliveryPoll = time.Second
)

// deliveryLine is one line of a relay process's log: a handler call ("deliver", Start to
// End; "hop" for the chain workload's, with Chain, Hop, Emitted and Duplicate) or an ack
// that returned nil ("ack", at End), "ready" once the relay runs, "took" and
// "released" (Seq: the partition), "stopping" when its standard input closed, and "stats":
// its Stats' LeasesLost, TakeOvers and ReTakes, whenever LeasesLost changed and once the
// relay stopped, and "commands" every commandsEvery while they change: the commands the
// process's store and lease clients sent since the relay started, by command name, which
// the last "stats" line has too. Times are Unix
// nanoseconds of the machine's clock, which every process shares.
type deliveryLine struct {
	Kind       string `json:"kind"`
	Source     string `json:"source,omitempty"`
	Seq        int64  `json:"seq,omitempty"`
	Start      int64  `json:"start,omitempty"`
	End        int64  `json:"end"`
	LeasesLost int64  `json:"leasesLost,omitempty"`
	TakeOvers  int64  `json:"takeOvers,omitempty"`
	ReTakes    int64  `json:"reTakes,omitempty"`
	// Skipped is the relay's Stats.Skipped on a "stats" line: the items its scans returned
	// while they were in flight.
	Skipped int64 `json:"skipped,omitempty"`
	// HandedOver, Targeted and Woken are the relay's Stats of those names on a "stats" line:
	// the items it took with no scan (its process's commits, marks that carried them), its
	// targeted reads, and the executions marks made it read.
	HandedOver int64 `json:"handedOver,omitempty"`
	Targeted   int64 `json:"targeted,omitempty"`
	Woken      int64 `json:"woken,omitempty"`
	// Chain and Hop name a "hop" line's event. Emitted is when its commit returned, having
	// emitted the chain's next hop (0: it emitted none); Duplicate says the dedupe answer
	// found the event processed, and nothing was committed; Refused is what the handler's
	// last refused commit was told ("conflict", "already processed", "outcome unknown"), and
	// Failed the error of a handler call that failed.
	Chain     int    `json:"chain,omitempty"`
	Hop       int    `json:"hop,omitempty"`
	Emitted   int64  `json:"emitted,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Refused   string `json:"refused,omitempty"`
	Failed    string `json:"failed,omitempty"`
	// Commands and LeaseCommands are the store's and the lease store's since the relay
	// started, on the last "stats" line ({} there when none was sent, null on the other
	// stats lines) and on the "commands" lines, written every commandsEvery while they
	// change.
	Commands      map[string]int64 `json:"commands"`
	LeaseCommands map[string]int64 `json:"leaseCommands"`
	// Operations are the store's Commands by the operation each served (aio.OperationOf).
	Operations map[string]int64 `json:"operations,omitempty"`
}

// reTakes returns Stats.ReTakes, or 0 for a relay whose Stats have none.
func reTakes(s relay.Stats) int64 {
	if f := reflect.ValueOf(s).FieldByName("ReTakes"); f.IsValid() {
		return f.Int()
	}
	return 0
}

// lineLog appends lines to a file opened with O_APPEND, one write each: a process killed
// with SIGKILL loses nothing it had written.
type lineLog struct{ f *os.File }

func (l lineLog) write(line deliveryLine) {
	b, err := json.Marshal(line)
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: relay process log:", err)
		os.Exit(1)
	}
}

// ackLine is a relay's store that logs every AckOutbox that returned nil, after it did.
type ackLine struct {
	execstore.Store
	log lineLog
}

func (s *ackLine) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	if err := s.Store.AckOutbox(ctx, sourceID, seq); err != nil {
		return err
	}
	s.log.write(deliveryLine{Kind: "ack", Source: sourceID, Seq: seq, End: time.Now().UnixNano()})
	return nil
}

// deliveryProcess is the bench binary run as a relay process: it delivers the outbox of the
// database its environment names, under a lease, with a handler that waits as long as its
// environment says (or the chain workload's, chainHandler), until its standard input closes
// (the parent closed it, or died). It returns the exit status.
func deliveryProcess() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "bench: relay process %s: %v\n", os.Getenv(envRelayProcess), err)
		return 1
	}
	ctx := context.Background()
	f, err := os.OpenFile(os.Getenv(envRelayLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	log := lineLog{f}
	// The relay's warnings (a renewal failed, a lease lost) beside the lines, for -keep.
	warnings, err := os.OpenFile(os.Getenv(envRelayLog)+".warnings", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(err)
	}
	defer warnings.Close()
	writeStacksOnSignal(os.Getenv(envRelayLog) + ".stacks")
	wait, err := time.ParseDuration(os.Getenv(envRelayWait))
	if err != nil || wait <= 0 {
		return fail(fmt.Errorf("%s=%q: not a positive duration", envRelayWait, os.Getenv(envRelayWait)))
	}
	storeCmds, leaseCmds := newCommandCounter(), newCommandCounter()
	conn := server.Connection{Database: os.Getenv(envRelayDB), ClientOptions: clientWithMonitor(storeCmds)}
	opts := aio.Options{Connection: conn}
	if os.Getenv(envRelayWorkload) == workloadChain {
		opts.CacheSize = chainCacheSize // the handlers load what this process committed last
	}
	store, err := aio.Open(ctx, os.Getenv(envRelayURI), opts)
	if err != nil {
		return fail(err)
	}
	defer store.Close(ctx)
	// The leases on a database of their own: their renewals never wait behind the acks, on
	// the embedded server either, which runs one write per database at a time.
	leases, err := idem.Open(ctx, os.Getenv(envRelayURI), idem.Options{Connection: server.Connection{
		Database: conn.Database + "_leases", ClientOptions: clientWithMonitor(leaseCmds)}})
	if err != nil {
		return fail(err)
	}
	defer leases.Close(ctx)

	// The reads a mark or a refused hand-over asks for, and the polls that leave out what is in flight.
	relayed := withScansOf(&ackLine{Store: store, log: log}, store)
	if sig := wake.Of(store); sig != nil {
		wake.Register(relayed, sig)
		defer wake.Unregister(relayed)
	}
	wake.RegisterBoard(relayed, wake.BoardOf(store)) // the commits of the other processes wake it
	defer wake.RegisterBoard(relayed, nil)
	handler := func(ctx context.Context, e execstore.OutboxEntry) error {
		start := time.Now()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		log.write(deliveryLine{Kind: "deliver", Source: e.SourceID, Seq: e.Seq, Start: start.UnixNano(), End: time.Now().UnixNano()})
		return nil
	}
	lanes := deliveryLanes
	if os.Getenv(envRelayWorkload) == workloadChain {
		handler, lanes = chainHandler(store, log), chainLanes
	}
	r := relay.New(relayed, handler, relay.Options{Lease: leases, LeaseDuration: deliveryLease, Lanes: lanes, PollInterval: deliveryPoll,
		Logger:   slog.New(slog.NewTextHandler(warnings, nil)),
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		OnPartition: func(e relay.PartitionEvent) {
			kind := "released"
			if e.Held {
				kind = "took"
			}
			log.write(deliveryLine{Kind: kind, Seq: int64(e.Partition), End: time.Now().UnixNano()})
		}})
	storeFrom, leaseFrom, opsFrom := storeCmds.snapshot(), leaseCmds.snapshot(), storeCmds.operations() // the opens' commands are not the relay's
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	log.write(deliveryLine{Kind: "ready", End: time.Now().UnixNano()})
	stats := func(last bool) {
		st := r.Stats()
		l := deliveryLine{Kind: "stats", End: time.Now().UnixNano(), LeasesLost: st.LeasesLost, TakeOvers: st.TakeOvers, ReTakes: reTakes(st),
			Skipped: st.Skipped, HandedOver: st.HandedOver, Targeted: st.Targeted, Woken: st.Woken}
		if last {
			l.Commands, l.LeaseCommands = storeCmds.snapshot().since(storeFrom), leaseCmds.snapshot().since(leaseFrom)
			l.Operations = storeCmds.operations().since(opsFrom)
		}
		log.write(l)
	}
	watchDone, watchStop := make(chan struct{}), make(chan struct{})
	go func() { // a line whenever a lease is lost, to say when, and the commands so far
		defer close(watchDone)
		var lost, sent int64
		lastSent := time.Now()
		for {
			select {
			case <-watchStop:
				return
			case <-time.After(deliveryLook):
			}
			if st := r.Stats(); st.LeasesLost != lost {
				lost = st.LeasesLost
				stats(false)
			}
			if time.Since(lastSent) < commandsEvery {
				continue
			}
			c, lc := storeCmds.snapshot().since(storeFrom), leaseCmds.snapshot().since(leaseFrom)
			if n := c.total() + lc.total(); n != sent {
				sent, lastSent = n, time.Now()
				log.write(deliveryLine{Kind: "commands", End: lastSent.UnixNano(), Commands: c, LeaseCommands: lc,
					Operations: storeCmds.operations().since(opsFrom)})
			}
		}
	}()

	_, _ = io.Copy(io.Discard, os.Stdin)
	stopCtx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	// The commands up to the stop, without the releases of the leases that the stop sends.
	now := time.Now()
	log.write(deliveryLine{Kind: "commands", End: now.UnixNano(), Commands: storeCmds.snapshot().since(storeFrom),
		LeaseCommands: leaseCmds.snapshot().since(leaseFrom), Operations: storeCmds.operations().since(opsFrom)})
	log.write(deliveryLine{Kind: "stopping", End: now.UnixNano()})
	closeErr := r.Close(stopCtx)
	close(watchStop)
	<-watchDone
	if closeErr != nil {
		return fail(closeErr)
	}
	if err := <-runErr; err != nil {
		return fail(err)
	}
	stats(true)
	return 0
}
