package relay

import (
	"errors"
	"fmt"
	"log/slog"
)

// Sentinel errors. Match them with errors.Is. Run called after Close returns
// execstore.ErrClosed, as a closed store's calls do.
var (
	// ErrRunning: Run was called while another Run of the same relay or sweeper runs.
	ErrRunning = errors.New("relay: already running")
	// ErrLeavePending is for handlers. One that returns it (or an error wrapping it) leaves
	// the entry or timer pending, not acked, without counting a handler error. Stats.Withheld
	// counts it instead. The item is handed out again after a back-off, as after an error, and later
	// items of the same execution wait for it. Tests use it to withhold acks on purpose.
	ErrLeavePending = errors.New("relay: leave pending")
	// ErrLeaseKeyInUse: Options.LeaseKey names a record of the lease store that is not a
	// relay's lease (a completed idempotency key, or one claimed with another fingerprint).
	// Run returns it. Pick another key.
	ErrLeaseKeyInUse = errors.New("relay: lease key is in use by something other than a relay")
	// ErrPartitionsDisagree: the relays of the lease key share another number of partitions
	// than this relay counts (its store another Partitions(), or a store that is not an
	// execstore.Partitioned, which counts 1), as the record LeaseKey/partitioning says: the
	// first relay of the key wrote it, once. Sharing the partitions then would deliver items
	// twice and leave others undelivered. Run returns an *Error matching it before it claims
	// any partition. Open every store of a database with the same Partitions, give relays of
	// different stores different lease keys, and use a new lease key to change the number.
	// Options.OnError is also given an *Error matching it, naming the member's key, for each
	// look that lists a live relay of another number or another share rule (an earlier
	// version's): that relay is left out of the share, and this one runs on.
	ErrPartitionsDisagree = errors.New("relay: the relays of the lease key disagree on the partitions")
	// ErrStandingBy: another relay without a lease delivers this store, and this one stands
	// by: a Relay or Sweeper without Options.Lease over a store that offers a lease store
	// (aio's) delivers only while it holds the sole lease (Options.LeaseKey + "/sole").
	// Options.OnError is given an *Error of OpClaim naming that key, matching it, once each
	// time the relay starts standing by.
	ErrStandingBy = errors.New("relay: another relay without a lease delivers this store; this one stands by")
	// ErrPermanent is for handlers. One that returns an error wrapping it (fmt.Errorf("bad
	// event: %w", relay.ErrPermanent)) says the item will never succeed: over a
	// DeadLetters store it is moved to dead at once, whatever Options.MaxAttempts says.
	ErrPermanent = errors.New("relay: permanent failure, never retry")
	// ErrNotRestored: a timer's handler failed after its own commit removed the timer
	// (see Sweeper), and the timer could not be put back because its execution committed
	// again in between: that later commit was made on the state without the timer, and may
	// have cancelled it. The timer is not fired again; its handling stands with the commit.
	// Options.OnError is given it as an *Error of OpRestore.
	ErrNotRestored = errors.New("relay: the timer's handler failed after its commit removed the timer, and the execution committed again since; it is not put back")
)

// Op names the operation an Error is about.
type Op string

// The operations that fail.
const (
	OpScan    Op = "scan"    // PendingOutbox, DueTimers
	OpHandle  Op = "handle"  // the handler
	OpAck     Op = "ack"     // AckOutbox, DeleteTimers
	OpClaim   Op = "claim"   // claiming the lease
	OpRenew   Op = "renew"   // renewing it
	OpRelease Op = "release" // releasing it
	OpFail    Op = "fail"    // recording a failed delivery (DeadLetters.Fail)
	// OpRestore is putting back a fired timer that its handler's commit removed, when the
	// handler then failed (see Sweeper).
	OpRestore Op = "restore"
	// OpRetain is reading or deleting finished executions past their retention
	// (Options.Retention).
	OpRetain Op = "retain"
	// OpCountDead is counting the dead items of the partitions held
	// (Options.DeadCountInterval).
	OpCountDead Op = "count dead"
	// OpRecordRates is recording a rate sample (Options.RatesInterval).
	OpRecordRates Op = "record rates"
)

// Error is what Options.OnError is given, and what Run returns when it stops on a failure.
// It holds the operation, the item concerned and the cause. It unwraps to the cause: an
// execstore or idem error, the handler's error, or ErrLeaseKeyInUse.
type Error struct {
	Op   Op
	Item string // the item as execstore.ItemRef.String names it ("outbox pay-t3/7"); a lease's key; "" for a scan
	Err  error
}

func (e *Error) Error() string {
	if e.Item == "" {
		return fmt.Sprintf("relay: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("relay: %s %s: %v", e.Op, e.Item, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// LogValue gives a log line the Error's parts as attributes of their own: op, item (when
// there is one), error (Error's one line) and, when the cause is a handler's panic, stack.
func (e *Error) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("op", string(e.Op))}
	if e.Item != "" {
		attrs = append(attrs, slog.String("item", e.Item))
	}
	attrs = append(attrs, slog.String("error", e.Error()))
	if stack := panicStack(e.Err); stack != "" {
		attrs = append(attrs, slog.String("stack", stack))
	}
	return slog.GroupValue(attrs...)
}

// PanicError is a handler's panic, recovered: the delivery fails with it as with an error the
// handler returned. Value is what the handler panicked with, Stack the stack of its goroutine
// at the panic. Error is one line, without the stack: Error.LogValue gives the stack an
// attribute of its own, and a DeadLetters store keeps it after that line in the failure's
// text (cut at execstore.MaxFailureBytes).
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("relay: the handler panicked: %v", e.Value) }

// Unwrap returns Value when it is an error (a panic with an error wrapping ErrPermanent is
// permanent), else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// panicStack returns the stack of the PanicError in err's chain, or "".
func panicStack(err error) string {
	var p *PanicError
	if errors.As(err, &p) {
		return string(p.Stack)
	}
	return ""
}
