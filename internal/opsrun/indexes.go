package opsrun

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ops"
)

// EnsureIndexes creates ops.Indexes if they are missing, then drops ops.ObsoleteIndexes if
// present. Creating an existing index is a no-op, and so is dropping a missing one, so every
// process may call it at start. One createIndexes per index: FerretDB 1.24.2 drops the
// connection on a createIndexes that names several indexes some of which exist.
//
// Each index is created in the first of its forms (ops.IndexSpec.Forms) the server builds: a
// server refuses an option it lacks (FerretDB 1.24: partialFilterExpression NotImplemented,
// enableCompositeTerm BadValue; MongoDB: enableCompositeTerm InvalidIndexSpecificationOption)
// and builds nothing. A server that builds an index of the same key under an obsolete name
// refuses another of the same form (IndexOptionsConflict): that obsolete index is dropped
// first.
func EnsureIndexes(ctx context.Context, env Env) error {
	for _, spec := range ops.Indexes() {
		if err := createIndex(ctx, env, spec); err != nil {
			return fmt.Errorf("execstore: creating index %s on %v: %w", spec.Name, spec.Key, err)
		}
	}
	return dropObsoleteIndexes(ctx, env)
}

// createIndex creates spec in the first of its forms the server builds.
func createIndex(ctx context.Context, env Env, spec ops.IndexSpec) error {
	forms := spec.Forms()
	var err error
	dropped := 0
	for i := 0; i < len(forms); i++ {
		err = runCreateIndex(ctx, env, forms[i])
		if err == nil {
			return nil
		}
		var ce mongo.CommandError
		switch {
		case !errors.As(err, &ce):
			return err
		case ce.Code == codeIndexOptionsConflict:
			// An index of the same key and options under another name: an obsolete one is
			// dropped and the form tried again; any other is the caller's to resolve.
			name, ok := sameKeyObsolete(ctx, env, spec.Key)
			if !ok || dropped == len(ops.ObsoleteIndexes()) {
				return err
			}
			dropped++
			if err := dropIndex(ctx, env, name); err != nil {
				return err
			}
			i--
		case IndexOptionRefused(err) && i < len(forms)-1:
			continue
		default:
			return err
		}
	}
	return err
}

// codeIndexOptionsConflict is the refusal of an index whose key an index of another name
// has, with the same options.
const codeIndexOptionsConflict = 85

// indexOptionRefusals are the codes with which a server refuses an index option it lacks:
// BadValue, InvalidOptions, CommandNotSupported, InvalidIndexSpecificationOption,
// NotImplemented.
var indexOptionRefusals = map[int32]bool{2: true, 72: true, 115: true, 197: true, 238: true}

// IndexOptionRefused reports whether err is a createIndexes refused for an index option the
// server lacks: the next of the index's forms (ops.IndexSpec.Forms) is to be tried.
func IndexOptionRefused(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && indexOptionRefusals[ce.Code]
}

func runCreateIndex(ctx context.Context, env Env, form bson.D) error {
	return env.Executions.Database().RunCommand(ctx, bson.D{
		{Key: "createIndexes", Value: env.Executions.Name()}, {Key: "indexes", Value: bson.A{form}},
	}).Err()
}

// sameKeyObsolete returns the name of an index of ops.ObsoleteIndexes whose key is key.
func sameKeyObsolete(ctx context.Context, env Env, key bson.D) (string, bool) {
	cur, err := env.Executions.Indexes().List(ctx)
	if err != nil {
		return "", false
	}
	var specs []struct {
		Name string `bson:"name"`
		Key  bson.D `bson:"key"`
	}
	if cur.All(ctx, &specs) != nil {
		return "", false
	}
	want, _ := bson.Marshal(normalKey(key))
	for _, s := range specs {
		got, _ := bson.Marshal(normalKey(s.Key))
		if slices.Contains(ops.ObsoleteIndexes(), s.Name) && string(got) == string(want) {
			return s.Name, true
		}
	}
	return "", false
}

// normalKey is key with every direction an int32, as servers answer listIndexes in various
// integer types.
func normalKey(key bson.D) bson.D {
	out := make(bson.D, len(key))
	for i, e := range key {
		dir := int32(1)
		switch v := e.Value.(type) {
		case int32:
			dir = v
		case int64:
			dir = int32(v)
		case float64:
			dir = int32(v)
		case int:
			dir = int32(v)
		}
		out[i] = bson.E{Key: e.Key, Value: dir}
	}
	return out
}
