package ops

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// IndexID is the name every server gives the unique index on _id.
const IndexID = "_id_"

// PendingOutboxScanOf selects the documents of executions ids that hold at least one outbox
// entry, on IndexID: a targeted read (execstore.Targeted) reads only the named documents,
// each by its _id, whatever the pending-work indexes hold. ids must be distinct.
func PendingOutboxScanOf(ids []string) Scan {
	return Scan{Filter: append(bson.D{inIDs(ids)}, PendingOutboxFilter()...), Hint: IndexID}
}

// DueScanOf selects the documents of executions ids whose timer hint is due at now (see
// DueFilter), on IndexID, in no order: the reader orders the timers of at most
// execstore.MaxTargetedIDs documents itself. A sort or a limit would also make a
// DocumentDB server keep the command's backend connection for a cursor and close it after,
// and the next command wait for a new one. ids must be distinct.
func DueScanOf(ids []string, now time.Time) Scan {
	return Scan{Filter: append(bson.D{inIDs(ids)}, DueFilter(now)...), Hint: IndexID}
}

// inIDs is the condition {_id: {$in: ids}}, the ids in increasing order.
func inIDs(ids []string) bson.E {
	sorted := slices.Sorted(slices.Values(ids))
	in := make(bson.A, len(sorted))
	for i, id := range sorted {
		in[i] = id
	}
	return bson.E{Key: fID, Value: bson.D{{Key: "$in", Value: in}}}
}

// Except is scan leaving out the documents ids, with the condition {_id: {$nin: ids}}, the
// ids in increasing order; scan itself when ids is empty. The scan keeps its index: the
// condition is checked on the documents the index selects.
func Except(scan Scan, ids []string) Scan {
	if len(ids) == 0 {
		return scan
	}
	cond := inIDs(ids)
	cond.Value = bson.D{{Key: "$nin", Value: cond.Value.(bson.D)[0].Value}}
	scan.Filter = append(slices.Clip(scan.Filter), cond)
	return scan
}
