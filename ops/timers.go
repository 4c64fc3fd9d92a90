package ops

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// DueFilter selects the documents whose timer hint is due at now. Fire times are stored as
// float64 seconds since the Unix epoch, the nearest to the time scheduled (see
// execstore.TimerOp). The hint, FieldTimerMin, is kept with $min when a timer is scheduled,
// and is never raised by a cancel or a delete; only the delete of the last timer removes it
// (DeleteLastTimerCommand). So it may be early, never late: every document
// with a due timer matches. DueScan adds the partitions to it, and its index makes the scan
// examine only documents whose hint is due. A matching document may hold no due timer: check
// each fire time under FieldTimers. It names $exists: true, which $lte implies, as the partial
// filter of IndexPendingTimers does: DocumentDB 0.106 narrows a scan of a partial index by
// the partition and the fire time only when the scan's filter holds the partial filter as
// written (otherwise it reads the whole index).
func DueFilter(now time.Time) bson.D {
	return bson.D{{Key: FieldTimerMin, Value: bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: contract.StoredTime(now)}}}}
}

// TimerVersionKey is the field under FieldTimerVersions of the timer at path.
func TimerVersionKey(path string) string { return FieldTimerVersions + "." + EncodeKey(path) }

// DeleteTimerCommand is the updateOne that removes the timer at path of execution id only
// while it still fires at fireAt (its stored seconds equal fireAt's) and, when version is
// positive, is still the arming of that version (execstore.DueTimer.Version), so a
// re-schedule that raced the sweep survives, even to the same fire time. Version 0 matches a
// timer by path and fire time alone, as before arming versions were kept. It removes the
// timer's version with it. It may be repeated: once the timer is gone it matches nothing.
func DeleteTimerCommand(id, path string, fireAt time.Time, version int64) (filter, update bson.D) {
	key := FieldTimers + "." + EncodeKey(path)
	filter = bson.D{{Key: fID, Value: id}, {Key: key, Value: contract.StoredTime(fireAt)}}
	if version > 0 {
		filter = append(filter, bson.E{Key: TimerVersionKey(path), Value: version})
	}
	return filter, bson.D{{Key: "$unset", Value: bson.D{{Key: key, Value: ""}, {Key: TimerVersionKey(path), Value: ""}}}}
}

// DeleteLastTimerCommand is DeleteTimerCommand for the execution's last timer: it matches
// only while FieldTimers holds that timer and no other, and then removes the hint too
// (FieldTimerMin), which no timer is left to need, in the same statement. Sent just before
// DeleteTimerBesidesCommand of the same timer, it spares the sweep a repair of the hint.
func DeleteLastTimerCommand(id, path string, fireAt time.Time, version int64) (filter, update bson.D) {
	key := EncodeKey(path)
	filter = bson.D{{Key: fID, Value: id}, {Key: FieldTimers, Value: bson.D{{Key: key, Value: contract.StoredTime(fireAt)}}}}
	if version > 0 {
		filter = append(filter, bson.E{Key: TimerVersionKey(path), Value: version})
	}
	return filter, bson.D{{Key: "$unset", Value: bson.D{{Key: FieldTimers + "." + key, Value: ""}, {Key: TimerVersionKey(path), Value: ""},
		{Key: FieldTimerMin, Value: ""}}}}
}

// DeleteTimerBesidesCommand is DeleteTimerCommand while the execution holds another timer
// too: the statement after DeleteLastTimerCommand. When that one removed the timer, a re-arm
// of the path at the same fire time in between holds no other timer either, and is left alone.
func DeleteTimerBesidesCommand(id, path string, fireAt time.Time, version int64) (filter, update bson.D) {
	filter, update = DeleteTimerCommand(id, path, fireAt, version)
	alone := bson.D{{Key: EncodeKey(path), Value: contract.StoredTime(fireAt)}}
	return append(filter, bson.E{Key: FieldTimers, Value: bson.D{{Key: "$ne", Value: alone}}}), update
}

// RestoreTimerCommand is the updateOne that puts back the timer at path of execution id, to
// fire at fireAt with its arming version armed (none when 0), which the commit that created
// version with token (CommitPlan.Token) removed (Seqs.Fired): only while the execution is
// still at that version, written by that commit, and has no timer at path. It keeps
// FieldTimerMin's promise with $min, and moves the version on by one (and drops the token):
// the timer is pending again, so a relay that knew the version scans (see execstore.Store),
// and what was read before it, a hint's repair computed without the timer included, is
// refused by its version guard. It may be repeated: once the timer is back it matches
// nothing.
func RestoreTimerCommand(id, path string, fireAt time.Time, armed, version, token int64) (filter, update bson.D) {
	key := FieldTimers + "." + EncodeKey(path)
	at := contract.StoredTime(fireAt)
	set := bson.D{{Key: key, Value: at}}
	if armed > 0 {
		set = append(set, bson.E{Key: TimerVersionKey(path), Value: armed})
	}
	return bson.D{{Key: fID, Value: id}, {Key: FieldVersion, Value: version}, {Key: FieldCommitToken, Value: token},
			{Key: key, Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$set", Value: set}, {Key: "$min", Value: bson.D{{Key: FieldTimerMin, Value: at}}},
			{Key: "$inc", Value: bson.D{{Key: FieldVersion, Value: int64(1)}}}, {Key: "$unset", Value: bson.D{{Key: FieldCommitToken, Value: ""}}}}
}
