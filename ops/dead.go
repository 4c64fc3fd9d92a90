package ops

import (
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// Field names of the dead letters (execstore.DeadLetters). A dead item is a DeadDoc under
// FieldDead, keyed by DeadKey, with the count fDeadN beside it. A timer's failed deliveries
// are a TimerFailDoc under FieldTimerFails, keyed as its timer is under FieldTimers; an
// entry's or intent's are its Failures.
const (
	FieldDead       = "dead"
	FieldTimerFails = "timer_fails"
	fDeadN          = "dead_n"
)

// DeadDoc is one dead item as stored under FieldDead.
type DeadDoc struct {
	Kind     string  `bson:"kind"`
	Seq      int64   `bson:"seq,omitempty"`
	Path     string  `bson:"path,omitempty"`
	FireAt   float64 `bson:"fire_at,omitempty"` // stored seconds, as under FieldTimers
	Version  int64   `bson:"v,omitempty"`
	TargetID *string `bson:"target_id,omitempty"`
	Event    []byte  `bson:"event,omitempty"`
	ChildID  string  `bson:"child_id,omitempty"`
	RootPath string  `bson:"root_path,omitempty"`
	Context  []byte  `bson:"context,omitempty"`
	Failures `bson:",inline"`
	DeadAt   time.Time `bson:"dead_at"`
	// CommittedAt is the entry's or intent's At, kept while dead and restored by a revive.
	CommittedAt time.Time `bson:"committed_at,omitempty"`
}

// TimerFailDoc is what is kept of a timer's failed deliveries: the fire time they failed at
// (stored seconds) and the Failures. It counts only while the timer still fires then.
type TimerFailDoc struct {
	At       float64 `bson:"at"`
	Failures `bson:",inline"`
}

// DeadKey is the key of a dead item under FieldDead: "o<seq>" for an outbox entry, "s<seq>"
// for a spawn intent, "t<encoded path>" for a timer (a later dead timer of the same path
// replaces an earlier one).
func DeadKey(ref execstore.ItemRef) string {
	switch ref.Kind {
	case execstore.OutboxItem:
		return "o" + strconv.FormatInt(ref.Seq, 10)
	case execstore.SpawnItem:
		return "s" + strconv.FormatInt(ref.Seq, 10)
	}
	return "t" + EncodeKey(ref.Path)
}

// PendingItemPath is the path of the pending item ref in its execution's document: the entry
// or intent under its seq, or the timer under its encoded path.
func PendingItemPath(ref execstore.ItemRef) string {
	switch ref.Kind {
	case execstore.OutboxItem:
		return FieldOutbox + "." + strconv.FormatInt(ref.Seq, 10)
	case execstore.SpawnItem:
		return FieldSpawns + "." + strconv.FormatInt(ref.Seq, 10)
	}
	return FieldTimers + "." + EncodeKey(ref.Path)
}

// pendingCount is the count beside the pending items of ref's kind, "" for timers.
func pendingCount(k execstore.ItemKind) string {
	switch k {
	case execstore.OutboxItem:
		return fOutboxN
	case execstore.SpawnItem:
		return fSpawnsN
	}
	return ""
}

// entryFailGuard is the filter of a Fail's write of an entry or intent: ref's document, ref
// still pending, with the attempts read (0: none recorded).
func entryFailGuard(ref execstore.ItemRef, attempts int64) bson.D {
	item := PendingItemPath(ref)
	filter := bson.D{{Key: fID, Value: ref.ExecutionID}, {Key: item + ".seq", Value: ref.Seq}}
	if attempts == 0 {
		return append(filter, bson.E{Key: item + ".attempts", Value: bson.D{{Key: "$exists", Value: false}}})
	}
	return append(filter, bson.E{Key: item + ".attempts", Value: attempts})
}

// FailCommand is the updateOne that records f, one more failed delivery of the pending item
// ref: guarded by the item as read (a timer at its stored fire time fireAt) with the attempts
// read (read; of a timer, with the fire time they were recorded at, read.At), it sets f. A
// timer's attempts recorded at another fire time count for nothing: f starts from one.
func FailCommand(ref execstore.ItemRef, fireAt float64, read TimerFailDoc, f Failures) (filter, update bson.D) {
	if ref.Kind == execstore.TimerItem {
		key := FieldTimerFails + "." + EncodeKey(ref.Path)
		filter = bson.D{{Key: fID, Value: ref.ExecutionID}, {Key: PendingItemPath(ref), Value: fireAt}}
		if read.Attempts == 0 {
			filter = append(filter, bson.E{Key: key + ".attempts", Value: bson.D{{Key: "$exists", Value: false}}})
		} else {
			filter = append(filter, bson.E{Key: key + ".at", Value: read.At}, bson.E{Key: key + ".attempts", Value: read.Attempts})
		}
		return filter, bson.D{{Key: "$set", Value: bson.D{{Key: key, Value: TimerFailDoc{At: fireAt, Failures: f}}}}}
	}
	item := PendingItemPath(ref)
	return entryFailGuard(ref, read.Attempts), bson.D{{Key: "$set", Value: bson.D{
		{Key: item + ".attempts", Value: f.Attempts},
		{Key: item + ".last_error", Value: f.LastError},
		{Key: item + ".last_at", Value: f.LastAt},
	}}}
}

// DeadCommand is the updateOne that moves the pending item ref, read as dead says and with
// the attempts read, from pending to dead: one write of its document, so the item is pending
// or dead, never both nor neither. The guard is FailCommand's. A timer's arming version goes
// with it, as dead's Version.
func DeadCommand(ref execstore.ItemRef, fireAt float64, read TimerFailDoc, dead DeadDoc) (filter, update bson.D) {
	filter, _ = FailCommand(ref, fireAt, read, Failures{})
	unset := bson.D{{Key: PendingItemPath(ref), Value: ""}}
	inc := bson.D{{Key: fDeadN, Value: int64(1)}}
	if ref.Kind == execstore.TimerItem {
		unset = append(unset, bson.E{Key: TimerVersionKey(ref.Path), Value: ""},
			bson.E{Key: FieldTimerFails + "." + EncodeKey(ref.Path), Value: ""})
	} else {
		inc = append(bson.D{{Key: pendingCount(ref.Kind), Value: int64(-1)}}, inc...)
	}
	return filter, bson.D{
		{Key: "$unset", Value: unset},
		{Key: "$inc", Value: inc},
		{Key: "$set", Value: bson.D{{Key: FieldDead + "." + DeadKey(ref), Value: dead}}},
	}
}

// ReviveCommand is the updateOne that puts the dead item ref back to pending, with no
// attempts: an entry or intent under its seq (pending is its OutboxDoc or SpawnDoc), a timer
// at its fire time with its arming version (dead.Version, when it has one), guarded by its
// path holding no timer. One write of its document, which also moves the version on by one
// (and drops the commit token, FieldCommitToken, which names the commit that wrote the
// version): the item is pending again, so a relay that knew the version scans (see
// execstore.DeadLetters), and a commit at the version read before fails its version guard. A
// timer also moves the hint (FieldTimerMin) below both its fire time and the hint read (hint,
// nil for none), guarded by that hint: a sweep's repair of the hint that read the document
// before the revival (a guarded update that takes only commits to add timers) then matches
// nothing, and cannot set the hint past the revived timer.
func ReviveCommand(ref execstore.ItemRef, dead DeadDoc, pending any, hint *float64) (filter, update bson.D) {
	key := FieldDead + "." + DeadKey(ref)
	filter = bson.D{{Key: fID, Value: ref.ExecutionID}, {Key: key + ".kind", Value: string(ref.Kind)}}
	set := bson.D{}
	inc := bson.D{{Key: fDeadN, Value: int64(-1)}}
	update = bson.D{{Key: "$unset", Value: bson.D{{Key: key, Value: ""}, {Key: FieldCommitToken, Value: ""}}}}
	if ref.Kind == execstore.TimerItem {
		filter = append(filter, bson.E{Key: key + ".fire_at", Value: dead.FireAt},
			bson.E{Key: PendingItemPath(ref), Value: bson.D{{Key: "$exists", Value: false}}})
		below := dead.FireAt
		if hint != nil {
			filter = append(filter, bson.E{Key: FieldTimerMin, Value: *hint})
			below = min(below, *hint)
		} else {
			filter = append(filter, bson.E{Key: FieldTimerMin, Value: bson.D{{Key: "$exists", Value: false}}})
		}
		set = append(set, bson.E{Key: PendingItemPath(ref), Value: dead.FireAt},
			bson.E{Key: FieldTimerMin, Value: math.Nextafter(below, math.Inf(-1))})
		if dead.Version > 0 {
			set = append(set, bson.E{Key: TimerVersionKey(ref.Path), Value: dead.Version})
		}
	} else {
		filter = append(filter, bson.E{Key: key + ".seq", Value: ref.Seq})
		set = append(set, bson.E{Key: PendingItemPath(ref), Value: pending})
		inc = append(bson.D{{Key: pendingCount(ref.Kind), Value: int64(1)}}, inc...)
	}
	inc = append(inc, bson.E{Key: FieldVersion, Value: int64(1)})
	return filter, append(update, bson.E{Key: "$inc", Value: inc}, bson.E{Key: "$set", Value: set})
}

// DiscardCommand is the updateOne that drops the dead item ref for good: guarded by the item
// being dead as ref names it (an entry or intent by its seq, a timer by its stored fire
// time, so that a later dead timer of the same path is not dropped for an earlier one), it
// unsets it and lowers the count. One write of its document; the version is not moved, as
// nothing becomes pending.
func DiscardCommand(ref execstore.ItemRef, fireAt float64) (filter, update bson.D) {
	key := FieldDead + "." + DeadKey(ref)
	filter = bson.D{{Key: fID, Value: ref.ExecutionID}, {Key: key + ".kind", Value: string(ref.Kind)}}
	if ref.Kind == execstore.TimerItem {
		filter = append(filter, bson.E{Key: key + ".fire_at", Value: fireAt})
	} else {
		filter = append(filter, bson.E{Key: key + ".seq", Value: ref.Seq})
	}
	return filter, bson.D{
		{Key: "$unset", Value: bson.D{{Key: key, Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: fDeadN, Value: int64(-1)}}},
	}
}

// DeadFilter selects the documents that hold dead items, of execution id when it is not "",
// from after on by _id.
func DeadFilter(id, after string) bson.D {
	filter := bson.D{{Key: fDeadN, Value: bson.D{{Key: "$gt", Value: 0}}}}
	switch {
	case id != "":
		filter = append(filter, bson.E{Key: fID, Value: id})
	case after != "":
		filter = append(filter, bson.E{Key: fID, Value: bson.D{{Key: "$gte", Value: after}}})
	}
	return filter
}

// DeadCountPipeline is the aggregation of ExecutionsCollection that counts the dead items of
// partitions: one row per partition with any, its _id the partition (null for the documents
// written before partitions, partition 0's) and dead the sum of their counts. Its $match is
// IndexDead's partial filter with the partition named, so that it reads only the documents
// that hold dead items.
func DeadCountPipeline(partitions []int) []bson.D {
	return []bson.D{
		{{Key: "$match", Value: append(bson.D{InPartitions(partitions)}, DeadItemsFilter()...)}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$" + FieldPartition},
			{Key: "dead", Value: bson.D{{Key: "$sum", Value: "$" + fDeadN}}},
		}}},
	}
}
