package execstore

import "time"

// PartitionBacklog is the work waiting in one partition at a moment (Now): the pending outbox
// entries and spawn intents and how long the oldest has waited, the due timers and how late
// the most overdue is, and the dead items. A partition with nothing waiting has none.
//
// Ages count from an item's CommittedAt, the committing process's clock, to Now, the reader's:
// a committer whose clock runs ahead of the reader's by d makes the age d shorter, one
// behind makes it d longer. Lag counts from a timer's fire time, which the committer chose, to
// Now: the reader's clock alone.
type PartitionBacklog struct {
	Partition     int
	Now           time.Time // the reader's clock when the figures were read
	PendingOutbox int64     // outbox entries not yet acknowledged (dead ones excluded)
	PendingSpawns int64     // spawn intents not yet acknowledged (dead ones excluded)
	// OldestPending is the CommittedAt of the oldest pending entry or intent; zero when none
	// pending records one (entries of earlier versions of the module record none).
	OldestPending time.Time
	DueTimers     int64     // timers whose fire time is at or before Now
	OldestDue     time.Time // the earliest fire time among them; zero when none is due
	Dead          int64     // dead items (DeadLetters)
}

// PendingAge is how long the oldest pending entry or intent has waited at Now; 0 when none
// records its commit, or when the committer's clock is ahead of the reader's by more.
func (b PartitionBacklog) PendingAge() time.Duration {
	if b.OldestPending.IsZero() {
		return 0
	}
	return max(b.Now.Sub(b.OldestPending), 0)
}

// TimerLag is how late the most overdue due timer is at Now; 0 when none is due.
func (b PartitionBacklog) TimerLag() time.Duration {
	if b.OldestDue.IsZero() {
		return 0
	}
	return max(b.Now.Sub(b.OldestDue), 0)
}
