package inspect

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

func TestParseListSort(t *testing.T) {
	for in, want := range map[string]ListSort{"": SortByID, "id": SortByID, " Created ": SortByCreated, "UPDATED": SortByUpdated} {
		got, err := ParseListSort(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseListSort("age")
	var q *QueryError
	require.True(t, errors.As(err, &q))
	require.Equal(t, `unknown order "age": id, created or updated`, err.Error())
}

// A keyset cursor reads back only in the order that wrote it; an id cursor, garbage, or a
// cursor of another order or direction is a *QueryError.
func TestKeysetCursor(t *testing.T) {
	ms := int64(1_900_000_000_123)
	for _, k := range []keyset{{At: &ms, ID: "a.b$c"}, {ID: "old"}} {
		c := k.encode(SortByUpdated, true)
		got, err := decodeKeyset(c, SortByUpdated, true)
		require.NoError(t, err)
		require.Equal(t, k.ID, got.ID)
		require.Equal(t, k.At, got.At)
	}
	c := keyset{At: &ms, ID: "x"}.encode(SortByCreated, false)
	for _, bad := range []struct {
		cursor string
		sort   ListSort
		desc   bool
		msg    string
	}{
		{c, SortByCreated, true, "the cursor resumes a listing by created ascending, not by created descending: start again from the first page"},
		{c, SortByUpdated, false, "the cursor resumes a listing by created ascending, not by updated ascending: start again from the first page"},
		{contract.EncodeCursor("x"), SortByCreated, false, `"AXg" is not a cursor of a listing by created`},
		{"x", SortByCreated, false, `"x" is not a cursor of a listing by created`},
	} {
		_, err := decodeKeyset(bad.cursor, bad.sort, bad.desc)
		var q *QueryError
		require.True(t, errors.As(err, &q), bad.msg)
		require.Equal(t, bad.msg, err.Error())
	}
}

// The filter of the documents after a keyset, in either direction, with and without a time:
// see the table in listorder.go.
func TestKeysetAfter(t *testing.T) {
	ms := int64(1_900_000_000_123)
	at := time.UnixMilli(ms).UTC()
	none := bson.E{Key: "updated_at", Value: nil}
	idGT := bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: "x"}}}
	idLT := bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: "x"}}}
	require.Equal(t, bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "updated_at", Value: bson.D{{Key: "$gt", Value: at}}}},
		bson.D{{Key: "updated_at", Value: at}, idGT},
	}}, keyset{At: &ms, ID: "x"}.after("updated_at", false))
	require.Equal(t, bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "updated_at", Value: bson.D{{Key: "$lt", Value: at}}}},
		bson.D{{Key: "updated_at", Value: at}, idLT},
		bson.D{none},
	}}, keyset{At: &ms, ID: "x"}.after("updated_at", true))
	require.Equal(t, bson.E{Key: "$or", Value: bson.A{
		bson.D{none, idGT},
		bson.D{{Key: "updated_at", Value: bson.D{{Key: "$type", Value: "date"}}}},
	}}, keyset{ID: "x"}.after("updated_at", false))
	require.Equal(t, bson.E{Key: "$or", Value: bson.A{bson.D{none, idLT}}}, keyset{ID: "x"}.after("updated_at", true))
}

// In id order a listing keeps the cursor execstore.Store.List returns, either way round; in
// a time's order the keyset leads the filter.
func TestListFilterOrders(t *testing.T) {
	f, err := listFilter(ListQuery{After: contract.EncodeCursor("m"), Desc: true, Definition: "d"})
	require.NoError(t, err)
	require.Equal(t, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: "m"}}}, {Key: "definition_id", Value: "d"}}, f)
	f, err = listFilter(ListQuery{After: "m"})
	require.NoError(t, err)
	require.Equal(t, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: "m"}}}}, f)
	f, err = listFilter(ListQuery{Sort: SortByCreated, Roots: true})
	require.NoError(t, err)
	require.Equal(t, bson.D{{Key: "parent_id", Value: nil}}, f)
	_, err = listFilter(ListQuery{Sort: SortByCreated, After: "m"})
	var q *QueryError
	require.True(t, errors.As(err, &q), "a plain id is no keyset")
}
