package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

func TestDedupeUpdateUnbounded(t *testing.T) {
	set, add := dedupeUpdate(Layout{}, 7, "ev")
	assert.Nil(t, set)
	assert.Equal(t, bson.D{{Key: "processed", Value: "ev"}}, add)
	set, add = dedupeUpdate(Layout{}, 7, "")
	assert.Nil(t, set)
	assert.Nil(t, add)
}

// With a window of 3, versions 3..5 write processed_1, 6..8 processed_0, …; the first
// version of a generation resets its array.
func TestDedupeUpdateWindow(t *testing.T) {
	env := Layout{DedupeWindow: 3}
	cases := []struct {
		version  int64
		set, add bson.D
	}{
		{2, nil, bson.D{{Key: "processed_0", Value: "ev"}}},
		{3, bson.D{{Key: "processed_1", Value: bson.A{"ev"}}}, nil},
		{4, nil, bson.D{{Key: "processed_1", Value: "ev"}}},
		{6, bson.D{{Key: "processed_0", Value: bson.A{"ev"}}}, nil},
		{9, bson.D{{Key: "processed_1", Value: bson.A{"ev"}}}, nil},
	}
	for _, c := range cases {
		set, add := dedupeUpdate(env, c.version, "ev")
		assert.Equal(t, c.set, set, "v%d", c.version)
		assert.Equal(t, c.add, add, "v%d", c.version)
	}
	// A generation starts even on a commit that records no id.
	set, add := dedupeUpdate(env, 6, "")
	assert.Equal(t, bson.D{{Key: "processed_0", Value: bson.A{}}}, set)
	assert.Nil(t, add)
}

// A commit's dedupe guard: the event is in none of the set's arrays (an absent one matches).
func TestDedupeGuard(t *testing.T) {
	assert.Nil(t, dedupeGuard(Layout{}, ""))
	assert.Equal(t, bson.D{{Key: "processed", Value: bson.D{{Key: "$ne", Value: "e"}}}}, dedupeGuard(Layout{}, "e"))
	assert.Equal(t, bson.D{
		{Key: "processed_0", Value: bson.D{{Key: "$ne", Value: "e"}}},
		{Key: "processed_1", Value: bson.D{{Key: "$ne", Value: "e"}}},
	}, dedupeGuard(Layout{DedupeWindow: 5}, "e"))

	p, err := BuildCommit(Layout{Profile: server.FerretDB, TraceMax: 3, DedupeWindow: 2},
		&execstore.Execution{ID: "x", Status: execstore.Running, Version: 2}, &execstore.Commit{ProcessedEventID: "$e"}, Seqs{})
	require.NoError(t, err)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(2)},
		{Key: "processed_0", Value: bson.D{{Key: "$ne", Value: "$e"}}},
		{Key: "processed_1", Value: bson.D{{Key: "$ne", Value: "$e"}}}}, p.Filter)
}
