package inspect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// rawDoc marshals d.
func rawDoc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// step encodes a trace step as the stores do.
func step(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := contract.EncodeMap(m)
	require.NoError(t, err)
	return b
}

// TestTraceShapes checks that the trace reads the same under either profile's shape: an
// array (MongoDB, with the nulls a $set by index may leave) or a sub-document keyed by index
// (FerretDB), oldest first, each step with its time when it has one.
func TestTraceShapes(t *testing.T) {
	s0 := ops.TraceDoc{Index: 7, Step: step(t, map[string]any{"to": "a"})} // written before steps had a time
	s1 := ops.TraceDoc{Index: 8, Step: step(t, map[string]any{"to": "b"}), At: time.UnixMilli(1_900_000_000_250)}
	want := []TraceStep{{Index: 7, Fields: []byte(`{"to":"a"}`)},
		{Index: 8, Fields: []byte(`{"to":"b"}`), At: "2030-03-17T17:46:40.250Z"}}

	array, err := traceOf(rawDoc(t, bson.D{{Key: ops.FieldTrace, Value: bson.A{nil, s1, s0}}}))
	require.NoError(t, err)
	require.Equal(t, want, array)
	keyed, err := traceOf(rawDoc(t, bson.D{{Key: ops.FieldTrace, Value: bson.D{{Key: "8", Value: s1}, {Key: "7", Value: s0}}}}))
	require.NoError(t, err)
	require.Equal(t, want, keyed)
	none, err := traceOf(rawDoc(t, bson.D{}))
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestDedupeFields checks that the dedupe set is read whether or not the store has a
// window: processed, or the two generations processed_0 and processed_1.
func TestDedupeFields(t *testing.T) {
	fields := dedupeFields()
	require.Len(t, fields, 3)
	doc := bson.D{}
	for i, f := range fields {
		doc = append(doc, bson.E{Key: f, Value: bson.A{"e" + string(rune('a'+i)), "shared"}})
	}
	require.Equal(t, []string{"ea", "shared", "eb", "ec"}, dedupeOf(rawDoc(t, doc)))
}

// TestTimerKeys checks that timer paths are decoded from their stored keys, and that a key
// ops.EncodeKey cannot have made is shown as stored, flagged. Fire times are RFC 3339 in UTC,
// to the nanosecond the stores read back; stored seconds no fire time stores as are flagged.
func TestTimerKeys(t *testing.T) {
	doc := rawDoc(t, bson.D{{Key: ops.FieldTimers, Value: bson.D{
		{Key: ops.EncodeKey("Fork.A$1"), Value: 1_900_000_000.0},
		{Key: "bad%zz", Value: int64(1_800_000_000)},
		{Key: ops.EncodeKey("Sub.Ms"), Value: contract.StoredTime(time.Date(2030, time.March, 17, 17, 46, 40, 250_000, time.UTC))},
		{Key: ops.EncodeKey("Nanos"), Value: contract.StoredTime(time.Date(2030, time.March, 17, 17, 46, 41, 123_456_789, time.UTC))},
		{Key: "Huge", Value: 1e300},
	}}})
	ts, err := timersOf(doc, testNow)
	require.NoError(t, err)
	require.Equal(t, []Timer{
		{Path: "bad%zz", FireAt: "2027-01-15T08:00:00Z", FireAtUnix: 1_800_000_000, InSeconds: -99_999_000, Due: true, BadKey: true},
		{Path: "Fork.A$1", FireAt: "2030-03-17T17:46:40Z", FireAtUnix: 1_900_000_000, InSeconds: 1000},
		{Path: "Sub.Ms", FireAt: "2030-03-17T17:46:40.00025Z", FireAtUnix: 1_900_000_000.00025, InSeconds: 1000},
		{Path: "Nanos", FireAt: "2030-03-17T17:46:41.123456717Z", FireAtUnix: 1_900_000_001.1234567, InSeconds: 1001.123},
		{Path: "Huge", FireAtUnix: 1e300, BadFireAt: true},
	}, ts)

	_, err = timersOf(rawDoc(t, bson.D{{Key: ops.FieldTimers, Value: bson.D{{Key: "x", Value: "soon"}}}}), testNow)
	require.ErrorContains(t, err, `the timer "x" holds a string, not a fire time`)
}
