package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

func mustMarshal(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := bson.Marshal(m)
	require.NoError(t, err)
	return b
}

// A trace of the other profile's shape is converted by a write guarded by the index and the
// other shape.
func TestTraceShapeCommand(t *testing.T) {
	isArray := bson.D{{Key: "$type", Value: "array"}}
	mongo, ferret := Env{Layout: ops.Layout{Profile: server.MongoDB, TraceMax: 3}}, Env{Layout: ops.Layout{Profile: server.FerretDB, TraceMax: 3}}
	steps := []ops.TraceDoc{{Index: 3, Step: []byte{5, 0, 0, 0, 0}}, {Index: 4, Step: []byte{5, 0, 0, 0, 0}}}
	filter, update := traceShapeCommand(mongo, "x", 5, steps)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "trace_next", Value: int64(5)},
		{Key: "trace", Value: bson.D{{Key: "$not", Value: isArray}}}}, filter)
	assert.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "trace", Value: bson.A{steps[0], steps[1]}}}}}, update)
	filter, update = traceShapeCommand(ferret, "x", 5, steps)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "trace_next", Value: int64(5)}, {Key: "trace", Value: isArray}}, filter)
	assert.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "trace", Value: bson.D{
		{Key: "3", Value: steps[0]}, {Key: "4", Value: steps[1]}}}}}}, update)
}

// A stored trace of either shape reads the same; the nulls a $set by index leaves in an
// array are skipped, and only the last max steps are kept.
func TestTraceStepsOfEitherShape(t *testing.T) {
	step := func(i int64) ops.TraceDoc {
		return ops.TraceDoc{Index: i, Step: mustMarshal(t, map[string]any{"i": i})}
	}
	raw := func(v any) bson.RawValue {
		b, err := bson.Marshal(bson.D{{Key: "trace", Value: v}})
		require.NoError(t, err)
		return bson.Raw(b).Lookup("trace")
	}
	want := []ops.TraceDoc{step(2), step(3)}
	for name, v := range map[string]any{
		"array":        bson.A{step(1), step(2), step(3)},
		"padded array": bson.A{step(1), nil, nil, step(2), nil, step(3)},
		"keyed":        bson.D{{Key: "3", Value: step(3)}, {Key: "1", Value: step(1)}, {Key: "2", Value: step(2)}},
	} {
		got, err := traceSteps(raw(v), 2)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	got, err := traceSteps(bson.RawValue{}, 2)
	require.NoError(t, err)
	assert.Empty(t, got, "no trace")
}
