package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/server"
)

// The trace's shape depends on the profile that wrote it: an array of steps on MongoDB, a
// sub-document keyed by index on FerretDB (see traceRing). A database written under one
// profile and used under the other (moved between servers, or opened with a forced Profile)
// has the other shape, on which this profile's update would fail (MongoDB's $push on a
// sub-document) or go wrong (a $set of "trace.<index>" on an array pads it with nulls). So
// every write that appends a step is guarded by its profile's shape, and a write that missed
// only that guard converts the trace and is run again.

// traceShapeGuard is the filter element that matches a trace of l's shape. On FerretDB's
// profile it is "not an array" rather than "a sub-document": MongoDB matches $type "object"
// against the elements of an array too, and a missing trace is fine there ($set creates it).
func traceShapeGuard(l Layout) bson.E {
	if l.Profile == server.FerretDB {
		return bson.E{Key: FieldTrace, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}}
	}
	return bson.E{Key: FieldTrace, Value: bson.D{{Key: "$type", Value: "array"}}}
}

// AppendTraceCommand is the updateOne that records step outside a commit. It appends step at
// its index (with its At, the caller's CommitTime, as the step's time), guarded by the stored FieldTraceNext (equal to step.Index) and by the trace's
// shape, and moves FieldTraceNext on. The version is left alone. When it matches nothing,
// either the index moved (read FieldTraceNext again and rebuild) or the trace has the other
// profile's shape.
func AppendTraceCommand(l Layout, id string, step TraceDoc) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: id}, {Key: FieldTraceNext, Value: step.Index}, traceShapeGuard(l)}
	set, unset, push := traceRing(l, step)
	set = append(set, bson.E{Key: FieldTraceNext, Value: step.Index + 1})
	update = bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	if len(push) > 0 {
		update = append(update, bson.E{Key: "$push", Value: push})
	}
	return filter, update
}
