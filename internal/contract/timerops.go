package contract

import "github.com/execstore/execstore"

// HeldTimerOps returns a copy of ops with each schedule's FireAt as the store holds it and
// DueTimers returns it: TimeFromStored(StoredTime(FireAt)), in UTC, with no monotonic clock
// reading. A cancel's FireAt is the zero time.Time. ops must have passed ValidateCommit.
func HeldTimerOps(ops []execstore.TimerOp) []execstore.TimerOp {
	if len(ops) == 0 {
		return nil
	}
	held := make([]execstore.TimerOp, len(ops))
	for i, op := range ops {
		held[i] = execstore.TimerOp{Path: op.Path, Cancel: op.Cancel}
		if !op.Cancel {
			held[i].FireAt, _ = TimeFromStored(StoredTime(op.FireAt))
		}
	}
	return held
}
