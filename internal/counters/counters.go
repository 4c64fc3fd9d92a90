// Package counters is the one statistics machinery of the module's stores: the calls and
// errors of each kind of operation, the unknown outcomes, the calls shed for load and the
// server commands, which every store counts alike and reports as a server.Stats. A store
// counts its own outcomes (conflicts, claims, …) beside these.
package counters

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

// Ops counts the operations of one store. It is an async.Recorder: Record is told the
// outcome of every operation. Every method is safe for concurrent use.
type Ops struct {
	store               string       // the store's package name, in log records
	log                 *slog.Logger // nil: nothing is logged
	names               []string
	calls, errs         []atomic.Int64
	unknown, overloaded atomic.Int64
	// Commands counts the commands the store's client sends (connect.Config.Commands).
	Commands atomic.Int64
}

// New returns the counters of a store whose operation kinds are 0…len(names)-1, named by
// names in Stats.
func New(names ...string) *Ops {
	return &Ops{names: names, calls: make([]atomic.Int64, len(names)), errs: make([]atomic.Int64, len(names))}
}

// Log makes Record log every unknown outcome to log (nil: none), as a warning naming store
// (the store's package: "aio", "idem", "journal"), the operation and the cause. Call it
// before the store takes calls.
func (o *Ops) Log(log *slog.Logger, store string) { o.log, o.store = log, store }

// Kind returns the kind named name; it panics on a name New was not given, which is a bug.
func (o *Ops) Kind(name string) int {
	for k, n := range o.names {
		if n == name {
			return k
		}
	}
	panic("counters: no operation named " + name)
}

// Record counts a completed call of kind, failed when err is not nil: an error matching
// execstore.ErrOutcomeUnknown or execstore.ErrOverloaded is counted as such too.
func (o *Ops) Record(kind int, err error) {
	o.calls[kind].Add(1)
	if err == nil {
		return
	}
	o.errs[kind].Add(1)
	switch {
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		o.unknown.Add(1)
		if o.log != nil {
			o.log.Warn("execstore: write outcome unknown: read it back before anything else",
				"store", o.store, "op", o.names[kind], "err", err)
		}
	case errors.Is(err, execstore.ErrOverloaded):
		o.overloaded.Add(1)
	}
}

// Gauges are what a store's pool reports of its queue.
type Gauges interface {
	Len() int
	InFlight() int
}

// Stats returns the counters as they are now, with the queue of g.
func (o *Ops) Stats(g Gauges) server.Stats {
	st := server.Stats{
		Queued: g.Len(), InFlight: g.InFlight(),
		Ops:            make(map[string]server.OpStats, len(o.names)),
		OutcomeUnknown: o.unknown.Load(), Overloaded: o.overloaded.Load(),
		ServerCommands: o.Commands.Load(),
	}
	for k, n := range o.names {
		st.Ops[n] = server.OpStats{Calls: o.calls[k].Load(), Errors: o.errs[k].Load()}
	}
	return st
}
