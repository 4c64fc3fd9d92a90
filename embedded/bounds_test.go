package embedded

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func TestPathPadding(t *testing.T) {
	for _, c := range []struct {
		path    string
		padding int
		ok      bool
	}{
		{"a", 0, true},
		{"a.b", 0, true},
		{"outbox.42", 43 * 4, true},
		{"a.0.b.7", 1*3 + 8*3, true},
		{"a.+7", 8 * 3, true}, // strconv.Atoi reads +7 as 7
		{"a.007", 8 * 3, true},
		{"a.$", 0, false},
		{"a.$[]", 0, false},
		{"a.$[x].b", 0, false},
		{"a..b", 0, false},
		{"a.-1", 0, false},
		{"a.99999999999999999999", 0, false},
		{"a.16777216", 0, false},
	} {
		padding, ok := pathPadding(c.path)
		assert.Equal(t, c.ok, ok, c.path)
		if c.ok {
			assert.Equal(t, c.padding, padding, c.path)
		}
	}
}

func rawDocument(t *testing.T, v any) bsoncore.Document {
	t.Helper()
	raw, err := bson.Marshal(v)
	require.NoError(t, err)
	return raw
}

// An update that only removes adds nothing but the slack, whatever its paths; an update
// that writes by position has no bound.
func TestGrowthBound(t *testing.T) {
	statementOf := func(update bson.D) statement {
		doc := rawDocument(t, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}}, {Key: "u", Value: update}})
		st, err := updateStatement(doc)
		require.NoError(t, err)
		return st
	}
	n, err := statementOf(bson.D{{Key: "$unset", Value: bson.D{{Key: "outbox.4000000", Value: ""}}},
		{Key: "$pull", Value: bson.D{{Key: "a.$[]", Value: 1}}}}).growthBound()
	require.NoError(t, err)
	assert.Equal(t, statementSlack, n)

	set := bson.D{{Key: "outbox.42", Value: "e"}}
	n, err = statementOf(bson.D{{Key: "$set", Value: set}}).growthBound()
	require.NoError(t, err)
	assert.Equal(t, statementSlack+growthFactor*(len(rawDocument(t, set))-5)+43*4, n)

	_, err = statementOf(bson.D{{Key: "$set", Value: bson.D{{Key: "a.$[]", Value: 1}}}}).growthBound()
	assert.ErrorIs(t, err, errUnbounded)
	_, err = statementOf(bson.D{{Key: "$rename", Value: bson.D{{Key: "a", Value: "b.3"}}}}).growthBound()
	assert.ErrorIs(t, err, errUnbounded)
}

// A replacement's bound is the replacement's, or the document's when that is larger (the
// statement may match nothing); an update's adds to the document's.
func TestBoundAfter(t *testing.T) {
	id := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "x")}
	replacement := bson.D{{Key: "a", Value: "b"}}
	doc := rawDocument(t, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}}, {Key: "u", Value: replacement}})
	st, err := updateStatement(doc)
	require.NoError(t, err)
	replaced := statementSlack + len(rawDocument(t, replacement)) + len(rawDocument(t, bson.D{{Key: "_id", Value: "x"}})) - 5

	n, err := st.boundAfter(100, id)
	require.NoError(t, err)
	assert.Equal(t, replaced, n)
	n, err = st.boundAfter(1<<20, id)
	require.NoError(t, err)
	assert.Equal(t, 1<<20, n)

	doc = rawDocument(t, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}},
		{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}})
	st, err = updateStatement(doc)
	require.NoError(t, err)
	growth, err := st.growthBound()
	require.NoError(t, err)
	n, err = st.boundAfter(1<<20, id)
	require.NoError(t, err)
	assert.Equal(t, 1<<20+growth, n)
}

// Only the documents before an insert's first write error are taken as inserted.
func TestInsertsDone(t *testing.T) {
	reply := func(v bson.D) bsoncore.Document { return rawDocument(t, v) }
	ok := bson.E{Key: "ok", Value: 1.0}
	assert.Equal(t, 3, insertsDone(reply(bson.D{{Key: "n", Value: int32(3)}, ok}), 3))
	assert.Equal(t, 1, insertsDone(reply(bson.D{{Key: "n", Value: int32(2)},
		{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(1)}, {Key: "code", Value: int32(11000)}}}}, ok}), 3))
	assert.Equal(t, 0, insertsDone(reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no"}}), 3))
	assert.Equal(t, 0, insertsDone(nil, 3))
}

func TestSizeBounds(t *testing.T) {
	b := newSizeBounds()
	a, c := namespace{"db", "a"}, namespace{"db", "c"}
	other := namespace{"other", "a"}
	b.set(a, map[string]int{"x": 10, "y": 20})
	b.set(c, map[string]int{"x": 30})
	b.set(other, map[string]int{"x": 40})

	n, ok := b.get(a, "x")
	assert.True(t, ok)
	assert.Equal(t, 10, n)
	b.forget(a, []string{"x"})
	_, ok = b.get(a, "x")
	assert.False(t, ok)
	b.forgetCollection(c)
	_, ok = b.get(c, "x")
	assert.False(t, ok)
	b.forgetDatabase("db")
	_, ok = b.get(a, "y")
	assert.False(t, ok)
	assert.Equal(t, 1, b.size())

	// An insert whose reply comes after a forgetAll does not set what it learned.
	epoch := b.currentEpoch()
	b.forgetAll()
	b.setSince(epoch, a, map[string]int{"x": 1})
	_, ok = b.get(a, "x")
	assert.False(t, ok)
	assert.Zero(t, b.size())

	// Past maxBoundEntries, everything is forgotten: the count never passes it.
	sizes := map[string]int{}
	for i := range maxBoundEntries + 10 {
		sizes[strconv.Itoa(i)] = i
	}
	b.set(a, sizes)
	assert.Equal(t, 10, b.size(), "the entries set after the count reached the cap")
}
