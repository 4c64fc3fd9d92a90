package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// The environment a relay process of TestProcesses is started with. It also gets MONGODB_URI,
// the parent's server, so that its TestMain starts no server of its own.
const (
	envChildName  = "EXECSTORE_RELAY_PROCESS"       // the process's name in the logs
	envChildDB    = "EXECSTORE_RELAY_PROCESS_DB"    // the database of the executions; the leases' is it with "_leases"
	envChildLog   = "EXECSTORE_RELAY_PROCESS_LOG"   // the file it appends its log lines to
	envChildLease = "EXECSTORE_RELAY_PROCESS_LEASE" // its relays' LeaseDuration (a time.Duration)
	envChildPoll  = "EXECSTORE_RELAY_PROCESS_POLL"  // its relays' PollInterval, when not childPoll
)

// How every relay process runs its Relay and its Sweeper.
const (
	childLanes = 4
	// childPoll is the relays' PollInterval, the default: no commit of these processes wakes
	// them, they poll. At 250ms, on the embedded server under CPU hogs, the scans of the
	// three relay processes (each reads every execution there) and their acks kept the
	// server's CPU busy, lease renewals came back late, and live relays lost leases.
	childPoll   = time.Second
	childHandle = 3 * time.Millisecond  // a handler's wait, as a downstream call's
	childStats  = 50 * time.Millisecond // how often a process logs its relays' Stats
)

// logLine is one line of a relay process's log. Kind says which fields are set:
//   - "ready": the relay and the sweeper run.
//   - "deliver" (Source, Seq, Target) and "fire" (Exec, Path, FireAt): one handler call, from
//     Start to End, with its Result ("ok" or the error).
//   - "ack" (Source, Seq) and "delete" (Exec, Path, FireAt): an ack or a timer's delete that
//     returned nil, logged once it had. End is when it returned.
//   - "partition" (Of, Partition, Held, TakeOver, At): an Options.OnPartition event.
//   - "stats" (Of, Holding, Partitions, TakeOvers, ReTakes, LeasesLost): a relay's Stats at
//     End. A process that stops cleanly logs its last ones after its relays stopped.
//   - "error" (Of, Path: the relay.Op, Target: the item, Result): an Options.OnError call.
//   - "stop": the process stopped cleanly, at End.
//
// Every time is in Unix nanoseconds on the machine's wall clock, which every process shares.
type logLine struct {
	Proc   string `json:"proc"`
	Kind   string `json:"kind"`
	Of     string `json:"of,omitempty"` // "outbox" (the Relay) or "timers" (the Sweeper)
	Source string `json:"source,omitempty"`
	Seq    int64  `json:"seq,omitempty"`
	Target string `json:"target,omitempty"`
	Exec   string `json:"exec,omitempty"`
	Path   string `json:"path,omitempty"`
	FireAt int64  `json:"fireAt,omitempty"` // Unix milliseconds
	Start  int64  `json:"start,omitempty"`
	End    int64  `json:"end,omitempty"`
	Result string `json:"result,omitempty"`

	Partition  int   `json:"partition,omitempty"`
	Held       bool  `json:"held,omitempty"`
	TakeOver   bool  `json:"takeOver,omitempty"`
	At         int64 `json:"at,omitempty"`
	Local      int64 `json:"local,omitempty"` // an OnPartition event's Local
	Holding    bool  `json:"holding,omitempty"`
	Partitions int   `json:"partitions,omitempty"`
	TakeOvers  int64 `json:"takeOvers,omitempty"`
	ReTakes    int64 `json:"reTakes,omitempty"`
	LeasesLost int64 `json:"leasesLost,omitempty"`
	Scans      int64 `json:"scans,omitempty"`
	Woken      int64 `json:"woken,omitempty"`
	Targeted   int64 `json:"targeted,omitempty"`
	HandedOver int64 `json:"handedOver,omitempty"`
}

// processLog appends lines to a file opened with O_APPEND, each with one write: a process
// killed with SIGKILL loses nothing it had written.
type processLog struct {
	name string
	f    *os.File
}

func (l *processLog) write(line logLine) {
	line.Proc = l.name
	b, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		panic(err)
	}
}

// ackRecorder is a relay's store that logs every AckOutbox and DeleteTimers that returned
// nil, after it did. It wakes the relay as the store it wraps does.
type ackRecorder struct {
	execstore.Store
	log *processLog
}

func (r *ackRecorder) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	if err := r.Store.AckOutbox(ctx, sourceID, seq); err != nil {
		return err
	}
	r.log.write(logLine{Kind: "ack", Source: sourceID, Seq: seq, End: time.Now().UnixNano()})
	return nil
}

func (r *ackRecorder) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	if err := r.Store.DeleteTimers(ctx, timers); err != nil {
		return err
	}
	end := time.Now().UnixNano()
	for _, t := range timers {
		r.log.write(logLine{Kind: "delete", Exec: t.ExecutionID, Path: t.Path, FireAt: t.FireAt.UnixMilli(), End: end})
	}
	return nil
}

// partitionedRecorder is an ackRecorder over a partitioned store: it is partitioned too, so
// that the relay shares the delivery by partition.
type partitionedRecorder struct {
	*ackRecorder
	p execstore.Partitioned
}

func (r *partitionedRecorder) Partitions() int { return r.p.Partitions() }

func (r *partitionedRecorder) PendingOutboxIn(ctx context.Context, partitions []int, limit int) ([]execstore.OutboxEntry, error) {
	return r.p.PendingOutboxIn(ctx, partitions, limit)
}

func (r *partitionedRecorder) PendingSpawnsIn(ctx context.Context, partitions []int, limit int) ([]execstore.SpawnEntry, error) {
	return r.p.PendingSpawnsIn(ctx, partitions, limit)
}

func (r *partitionedRecorder) DueTimersIn(ctx context.Context, partitions []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return r.p.DueTimersIn(ctx, partitions, now, limit)
}

// recording wraps store in an ackRecorder, partitioned when store is, registered on store's
// wake-up signal. The returned function unregisters it.
func recording(store execstore.Store, log *processLog) (execstore.Store, func()) {
	var wrapped execstore.Store = &ackRecorder{Store: store, log: log}
	if p, ok := store.(execstore.Partitioned); ok {
		wrapped = &partitionedRecorder{ackRecorder: wrapped.(*ackRecorder), p: p}
	}
	if sig := wake.Of(store); sig != nil {
		wake.Register(wrapped, sig)
	}
	wake.RegisterBoard(wrapped, wake.BoardOf(store))
	return wrapped, func() {
		wake.Unregister(wrapped)
		wake.RegisterBoard(wrapped, nil)
	}
}

// onPartition sets opts.OnPartition, when Options has it, to log each event as of's, and
// reports whether it did. A relay without it holds one lease for everything and reports no
// events. Once every relay has it, set it directly.
func onPartition(opts *relay.Options, log *processLog, of string) bool {
	field := reflect.ValueOf(opts).Elem().FieldByName("OnPartition")
	if !field.IsValid() {
		return false
	}
	field.Set(reflect.MakeFunc(field.Type(), func(args []reflect.Value) []reflect.Value {
		e := args[0]
		log.write(logLine{Kind: "partition", Of: of, Partition: int(e.FieldByName("Partition").Int()),
			Held: e.FieldByName("Held").Bool(), TakeOver: e.FieldByName("TakeOver").Bool(),
			At: e.FieldByName("At").Interface().(time.Time).UnixNano(), Local: e.FieldByName("Local").Interface().(time.Time).UnixNano()})
		return nil
	}))
	return true
}

// partitionsHeld returns Stats.Partitions, or 0 for a relay whose Stats have none.
func partitionsHeld(s relay.Stats) int {
	if f := reflect.ValueOf(s).FieldByName("Partitions"); f.IsValid() {
		return int(f.Int())
	}
	return 0
}

// reTakes returns Stats.ReTakes, or 0 for a relay whose Stats have none.
func reTakes(s relay.Stats) int64 {
	if f := reflect.ValueOf(s).FieldByName("ReTakes"); f.IsValid() {
		return f.Int()
	}
	return 0
}

// TestProcessChild is a relay process of TestProcesses: it runs only when started by it,
// with the environment above. It runs a Relay and a Sweeper over the parent's database, with
// leases, until its standard input closes, then stops them cleanly.
func TestProcessChild(t *testing.T) {
	name := os.Getenv(envChildName)
	if name == "" {
		return // not started by TestProcesses: nothing to run
	}
	ctx := context.Background()
	uri, db := os.Getenv("MONGODB_URI"), os.Getenv(envChildDB)
	lease, err := time.ParseDuration(os.Getenv(envChildLease))
	require.NoError(t, err)
	f, err := os.OpenFile(os.Getenv(envChildLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	log := &processLog{name: name, f: f}
	// The relays' own log (Options.Logger) goes beside it, for a failed run to be read.
	relayLogFile, err := os.OpenFile(strings.TrimSuffix(os.Getenv(envChildLog), ".log")+".relay.log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer relayLogFile.Close()
	relayLog := slog.New(slog.NewJSONHandler(relayLogFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: db}})
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close(ctx)) }()
	leases, err := idem.Open(ctx, uri, idem.Options{Connection: server.Connection{Database: db + "_leases"}})
	require.NoError(t, err)
	defer func() { require.NoError(t, leases.Close(ctx)) }()
	relayStore, unregister := recording(store, log)
	defer unregister()
	poll := childPoll
	if p := os.Getenv(envChildPoll); p != "" {
		poll, err = time.ParseDuration(p)
		require.NoError(t, err)
	}

	options := func(of string) relay.Options {
		opts := relay.Options{Lease: leases, LeaseDuration: lease, Lanes: childLanes, PollInterval: poll,
			Logger:   relayLog.With("of", of),
			RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			OnError: func(err error) {
				line := logLine{Kind: "error", Of: of, Result: err.Error(), End: time.Now().UnixNano()}
				var re *relay.Error
				if errors.As(err, &re) {
					line.Path, line.Target = string(re.Op), re.Item
				}
				log.write(line)
			}}
		onPartition(&opts, log, of)
		return opts
	}
	r := relay.New(relayStore, func(ctx context.Context, e execstore.OutboxEntry) error {
		start := time.Now()
		err := handle(ctx)
		log.write(logLine{Kind: "deliver", Source: e.SourceID, Seq: e.Seq, Target: e.TargetID,
			Start: start.UnixNano(), End: time.Now().UnixNano(), Result: result(err)})
		return err
	}, options("outbox"))
	sw := relay.NewSweeper(relayStore, func(ctx context.Context, d execstore.DueTimer) error {
		start := time.Now()
		err := handle(ctx)
		log.write(logLine{Kind: "fire", Exec: d.ExecutionID, Path: d.Path, FireAt: d.FireAt.UnixMilli(),
			Start: start.UnixNano(), End: time.Now().UnixNano(), Result: result(err)})
		return err
	}, options("timers"))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	runErrs := make(chan error, 2)
	for _, x := range []interface{ Run(context.Context) error }{r, sw} {
		wg.Go(func() { runErrs <- x.Run(runCtx) })
	}
	statsDone := make(chan struct{})
	logStats := func() {
		now := time.Now().UnixNano()
		for of, s := range map[string]relay.Stats{"outbox": r.Stats(), "timers": sw.Stats()} {
			log.write(logLine{Kind: "stats", Of: of, Holding: s.Holding, Partitions: partitionsHeld(s),
				TakeOvers: s.TakeOvers, ReTakes: reTakes(s), LeasesLost: s.LeasesLost, Scans: s.Scans, Woken: s.Woken,
				Targeted: s.Targeted, HandedOver: s.HandedOver, End: now})
		}
	}
	wg.Go(func() {
		tick := time.NewTicker(childStats)
		defer tick.Stop()
		for {
			select {
			case <-statsDone:
				return
			case <-tick.C:
				logStats()
			}
		}
	})
	log.write(logLine{Kind: "ready", End: time.Now().UnixNano()})

	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	stopCtx, stopCancel := context.WithTimeout(ctx, waitLong)
	defer stopCancel()
	require.NoError(t, r.Close(stopCtx))
	require.NoError(t, sw.Close(stopCtx))
	cancel()
	close(statsDone)
	wg.Wait()
	close(runErrs)
	for err := range runErrs {
		require.NoError(t, err)
	}
	logStats()
	log.write(logLine{Kind: "stop", End: time.Now().UnixNano()})
}

// handle is a relay process's handling of one item: a wait, as for a downstream call.
func handle(ctx context.Context) error {
	select {
	case <-time.After(childHandle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func result(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}
