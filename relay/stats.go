package relay

import "sync/atomic"

// Stats are a relay's or sweeper's counters since New, and two gauges. For a Sweeper an
// item is a due timer, and acking it is deleting it.
type Stats struct {
	Scans int64 // scans of the store
	// Targeted counts the scans, of those, that read named executions alone, by their ids
	// (execstore.Targeted): scans owed for the items the relay left in the store, or for
	// timers come due.
	Targeted   int64
	ScanErrors int64
	// Wakeups counts the scans asked for by commits through a store of this process whose
	// items could not be handed over. The other scans follow a poll, a partition taken, a
	// full scan or a back-off.
	Wakeups int64
	// Woken counts the executions commits through stores of other processes marked on the
	// store's board (Options.WakeInterval) that this relay read at once, by their ids.
	Woken int64
	// HandedOver counts items taken with no scan: from commits through a store of this
	// process, or from the marks of other processes' commits that carried them.
	HandedOver int64
	// Skipped counts items a scan returned that were in flight, or whose ack completed after
	// the scan began. They are never handed out twice.
	Skipped       int64
	Delivered     int64 // handler calls
	Succeeded     int64 // handler calls that returned nil
	HandlerErrors int64
	Withheld      int64 // handler calls that returned ErrLeavePending
	Acked         int64 // items acked (timers deleted) after their handler returned nil
	AckErrors     int64
	// Carried counts the timers, of those acked, that the handler's own commit removed in
	// its write, so that the sweeper sent no delete; Restored those such a commit removed
	// that were put back because the handler then failed.
	Carried, Restored int64
	// Cancelled counts timers read ahead that a commit cancelled or re-armed before their
	// fire time: dropped, not fired.
	Cancelled int64
	// Dead counts items moved to dead (Options.MaxAttempts, ErrPermanent), and
	// FailureErrors the failed deliveries whose record could not be written.
	Dead          int64
	FailureErrors int64
	Leases        int64 // leases taken
	TakeOvers     int64 // of which taken over from a holder whose lease had lapsed
	ReTakes       int64 // of which this relay's own, taken again after it ran out
	LeasesLost    int64 // leases lost before the relay stopped: fenced, or run out unrenewed
	// Retained counts the finished executions deleted for their retention
	// (Options.Retention), and RetentionErrors the reads and deletes of it that failed.
	Retained, RetentionErrors int64
	// DeadCounts counts the counts of dead items sent (Options.DeadCountInterval), and
	// DeadCountErrors those that failed.
	DeadCounts, DeadCountErrors int64
	// RateRecords counts the rate samples recorded (Options.RatesInterval), and
	// RateRecordErrors those that failed.
	RateRecords, RateRecordErrors int64
	InFlight                      int64 // gauge: items held now (waiting for their fire time, queued in a lane, in a handler, or awaiting the ack)
	Holding                       bool  // gauge: delivering now (holding a partition)
	Partitions                    int   // gauge: partitions held now
}

// counters are the live Stats.
type counters struct {
	scans, targeted, scanErrors, wakeups, woken, skipped, handedOver atomic.Int64
	delivered, succeeded, handlerErrors, withheld                    atomic.Int64
	acked, ackErrors, cancelled                                      atomic.Int64
	carried, restored                                                atomic.Int64
	dead, failureErrors                                              atomic.Int64
	leases, takeOvers, reTakes, leasesLost                           atomic.Int64
	inFlight, partitions                                             atomic.Int64
	retained, retentionErrors                                        atomic.Int64
	deadCounts, deadCountErrors                                      atomic.Int64
	rateRecords, rateRecordErrors                                    atomic.Int64
	holding                                                          atomic.Bool
}

func (c *counters) snapshot() Stats {
	return Stats{
		Scans: c.scans.Load(), Targeted: c.targeted.Load(), ScanErrors: c.scanErrors.Load(), Wakeups: c.wakeups.Load(), Woken: c.woken.Load(), HandedOver: c.handedOver.Load(),
		Skipped: c.skipped.Load(), Delivered: c.delivered.Load(), Succeeded: c.succeeded.Load(), HandlerErrors: c.handlerErrors.Load(),
		Withheld: c.withheld.Load(), Acked: c.acked.Load(), AckErrors: c.ackErrors.Load(),
		Carried: c.carried.Load(), Restored: c.restored.Load(),
		Cancelled: c.cancelled.Load(), Dead: c.dead.Load(), FailureErrors: c.failureErrors.Load(),
		Leases: c.leases.Load(), TakeOvers: c.takeOvers.Load(), ReTakes: c.reTakes.Load(), LeasesLost: c.leasesLost.Load(),
		InFlight: c.inFlight.Load(), Holding: c.holding.Load(), Partitions: int(c.partitions.Load()),
		Retained: c.retained.Load(), RetentionErrors: c.retentionErrors.Load(),
		DeadCounts: c.deadCounts.Load(), DeadCountErrors: c.deadCountErrors.Load(),
		RateRecords: c.rateRecords.Load(), RateRecordErrors: c.rateRecordErrors.Load(),
	}
}
