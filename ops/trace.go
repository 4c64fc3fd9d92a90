package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// AppendTrace records step outside a commit: it reads the execution's trace_next and then
// appends under a guard on that value (retrying when a concurrent commit or append took it).
// Two round trips; the execution's version is left alone.
func AppendTrace(ctx context.Context, env Env, id string, step map[string]any) error {
	b, err := encodeMap(step)
	if err != nil {
		return execstore.Invalid("step", "cannot be encoded as BSON: %v", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		version, next, err := readVersion(ctx, env, id)
		if err != nil {
			return err
		}
		if version == execstore.NoVersion {
			return fmt.Errorf("%w: %q", execstore.ErrNotFound, id)
		}
		filter, update := AppendTraceCommand(env, id, traceDoc{Index: next, Step: b})
		res, err := env.Executions.UpdateOne(ctx, filter, update)
		if err != nil {
			return writeFailure("append trace", id, err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
	}
}

// AppendTraceCommand is the guarded update of AppendTrace.
func AppendTraceCommand(env Env, id string, step traceDoc) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: id}, {Key: fTraceNext, Value: step.Index}}
	set, unset, push := traceRing(env, step)
	set = append(set, bson.E{Key: fTraceNext, Value: step.Index + 1})
	update = bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	if len(push) > 0 {
		update = append(update, bson.E{Key: "$push", Value: push})
	}
	return filter, update
}

// ReadTrace returns the kept trace steps of id, oldest first (none for an unknown id), at most
// env.TraceMax of them. One find projecting only the trace.
func ReadTrace(ctx context.Context, env Env, id string) ([]execstore.TraceStep, error) {
	var raw bson.Raw
	err := env.Executions.FindOne(ctx, LoadFilter(id),
		options.FindOne().SetProjection(bson.D{{Key: fTrace, Value: 1}})).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, readFailure("read trace", id, err)
	}
	var docs []traceDoc
	switch v := raw.Lookup(fTrace); v.Type {
	case bson.TypeArray:
		err = v.Unmarshal(&docs)
	case bson.TypeEmbeddedDocument:
		var keyed map[string]traceDoc
		err = v.Unmarshal(&keyed)
		for _, d := range keyed {
			docs = append(docs, d)
		}
	}
	if err != nil {
		return nil, readFailure("read trace", id, err)
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Index < docs[j].Index })
	if len(docs) > env.TraceMax {
		docs = docs[len(docs)-env.TraceMax:]
	}
	out := make([]execstore.TraceStep, len(docs))
	for i, d := range docs {
		m, err := decodeMap(d.Step)
		if err != nil {
			return nil, readFailure("read trace", id, err)
		}
		out[i] = execstore.TraceStep{Index: d.Index, Fields: m}
	}
	return out, nil
}
