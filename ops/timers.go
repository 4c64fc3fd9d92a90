package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// DueFilter selects the documents whose timer hint is due at now. The hint, FieldTimerMin,
// is kept with $min when a timer is scheduled, and is never raised by a cancel or a delete.
// So it may be early, never late: every document with a due timer matches. The index
// timers_due makes the scan examine only documents whose hint is due. A matching document
// may hold no due timer: check each fire time under FieldTimers.
func DueFilter(now float64) bson.D {
	return bson.D{{Key: FieldTimerMin, Value: bson.D{{Key: "$lte", Value: now}}}}
}

// DeleteTimerCommand is the updateOne that removes the timer at path of execution id only
// while it still fires at fireAt, so a re-schedule that raced the sweep survives. It may be
// repeated: once the timer is gone it matches nothing.
func DeleteTimerCommand(id, path string, fireAt float64) (filter, update bson.D) {
	key := FieldTimers + "." + EncodeKey(path)
	return bson.D{{Key: fID, Value: id}, {Key: key, Value: fireAt}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: key, Value: ""}}}}
}
