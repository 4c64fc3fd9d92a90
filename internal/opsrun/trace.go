package opsrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// AppendTrace records step outside a commit: it reads the execution's trace_next and then
// appends under a guard on that value (retrying when a concurrent commit or append took it).
// Two round trips; the execution's version is left alone.
func AppendTrace(ctx context.Context, env Env, id string, step map[string]any) error {
	b, err := contract.EncodeMap(step)
	if err != nil {
		return contract.Invalid("step", "cannot be encoded as BSON: %v", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := readState(ctx, env, id, "")
		if err != nil {
			return err
		}
		next := st.traceNext
		if st.version == execstore.NoVersion {
			return fmt.Errorf("%w: %q", execstore.ErrNotFound, id)
		}
		filter, update := ops.AppendTraceCommand(env.Layout, id, ops.TraceDoc{Index: next, Step: b, At: ops.CommitTime()})
		res, err := env.Executions.UpdateOne(ctx, filter, update)
		if err != nil {
			return outcome.WriteFailure("append trace", id, err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		// Missed: the index moved (try again), or the trace has the other profile's shape.
		if err := repairTraceShape(ctx, env, id, next); err != nil {
			return fmt.Errorf("execstore: append trace of %q not applied: %w", id, err)
		}
	}
}

// ReadTrace returns the kept trace steps of id, oldest first (none for an unknown id), at most
// env.TraceMax of them. One find projecting only the trace.
func ReadTrace(ctx context.Context, env Env, id string) ([]execstore.TraceStep, error) {
	var raw bson.Raw
	err := env.Executions.FindOne(ctx, loadFilter(id),
		options.FindOne().SetProjection(bson.D{{Key: ops.FieldTrace, Value: 1}})).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, outcome.ReadFailure("read trace", id, err)
	}
	docs, err := traceSteps(raw.Lookup(ops.FieldTrace), env.TraceMax)
	if err != nil {
		return nil, outcome.ReadFailure("read trace", id, err)
	}
	out := make([]execstore.TraceStep, len(docs))
	for i, d := range docs {
		m, err := contract.DecodeMap(d.Step)
		if err != nil {
			return nil, outcome.ReadFailure("read trace", id, err)
		}
		out[i] = execstore.TraceStep{Index: d.Index, Fields: m, At: utc(d.At)}
	}
	return out, nil
}

// repairTraceShape converts the trace of id to env's shape, keeping its last env.TraceMax
// steps, if the document still has trace_next == traceNext and the other shape. The write is
// guarded by both, so it is harmless when an append moved on meanwhile; the version is left
// alone. It does nothing (one read) when the shape is already right.
func repairTraceShape(ctx context.Context, env Env, id string, traceNext int64) error {
	var raw bson.Raw
	err := env.primary().FindOne(ctx, loadFilter(id),
		options.FindOne().SetProjection(bson.D{{Key: ops.FieldTrace, Value: 1}, {Key: ops.FieldTraceNext, Value: 1}})).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return outcome.ReadFailure("read trace", id, err)
	}
	if n, ok := raw.Lookup(ops.FieldTraceNext).AsInt64OK(); !ok || n != traceNext {
		return nil // moved on: the caller tries again with the new index
	}
	v := raw.Lookup(ops.FieldTrace)
	isArray := v.Type == bson.TypeArray
	if isArray == (env.Profile != server.FerretDB) && (isArray || v.Type == bson.TypeEmbeddedDocument) {
		return nil // already this profile's shape
	}
	steps, err := traceSteps(v, env.TraceMax)
	if err != nil {
		return fmt.Errorf("converting the trace to the %s shape: %w", env.Profile, err)
	}
	filter, update := traceShapeCommand(env, id, traceNext, steps)
	if _, err := env.Executions.UpdateOne(ctx, filter, update); err != nil {
		return fmt.Errorf("converting the trace to the %s shape: %w", env.Profile, outcome.WriteFailure("convert trace", id, err))
	}
	return nil
}

// traceShapeCommand is the update that replaces the trace of id with steps in env's shape,
// only while trace_next is still traceNext and the trace still has another shape.
func traceShapeCommand(env Env, id string, traceNext int64, steps []ops.TraceDoc) (filter, update bson.D) {
	isArray := bson.D{{Key: "$type", Value: "array"}}
	otherShape := bson.E{Key: ops.FieldTrace, Value: isArray} // FerretDB's profile: an array is wrong
	if env.Profile != server.FerretDB {
		otherShape.Value = bson.D{{Key: "$not", Value: isArray}}
	}
	filter = bson.D{{Key: fID, Value: id}, {Key: ops.FieldTraceNext, Value: traceNext}, otherShape}
	var trace any
	if env.Profile == server.FerretDB {
		keyed := bson.D{}
		for _, s := range steps {
			keyed = append(keyed, bson.E{Key: strconv.FormatInt(s.Index, 10), Value: s})
		}
		trace = keyed
	} else {
		arr := bson.A{}
		for _, s := range steps {
			arr = append(arr, s)
		}
		trace = arr
	}
	return filter, bson.D{{Key: "$set", Value: bson.D{{Key: ops.FieldTrace, Value: trace}}}}
}

// traceSteps reads the steps of a stored trace of either shape, oldest first, the last max
// of them. Anything that is not a step (the nulls a $set by index leaves in an array) is
// skipped; a missing trace has no steps.
func traceSteps(v bson.RawValue, max int) ([]ops.TraceDoc, error) {
	var elems []bson.RawElement
	var err error
	switch v.Type {
	case bson.TypeArray, bson.TypeEmbeddedDocument:
		elems, err = bson.Raw(v.Value).Elements()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	docs := make([]ops.TraceDoc, 0, len(elems))
	for _, e := range elems {
		ev := e.Value()
		if ev.Type != bson.TypeEmbeddedDocument {
			continue
		}
		var d ops.TraceDoc
		if err := ev.Unmarshal(&d); err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Index < docs[j].Index })
	if len(docs) > max {
		docs = docs[len(docs)-max:]
	}
	return docs, nil
}
