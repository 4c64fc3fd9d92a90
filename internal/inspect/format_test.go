package inspect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// testNow is the tests' now: 2030-03-17T17:30:00Z, 1000 s before 1_900_000_000.
var testNow = time.Unix(1_899_999_000, 0).UTC()

// TestPayloads checks how opaque bytes are shown: JSON as JSON, text as a quoted string,
// binary as base64 up to 1 KiB and as a size past it; previews cut at a rune boundary.
func TestPayloads(t *testing.T) {
	require.Equal(t, "0 bytes", describePayload(nil).Line())
	require.Equal(t, `22 bytes, JSON: {"a":[1,2],"b":"x"}`, describePayload([]byte(`{"a": [1, 2], "b":"x"}`)).Line())
	require.Equal(t, `12 bytes, text: "two\nlines é"`, describePayload([]byte("two\nlines é")).Line())
	require.Equal(t, "1 byte, binary, base64: AA==", describePayload([]byte{0}).Line())
	require.Equal(t, "2048 bytes, binary (not shown past 1024 bytes)", describePayload(make([]byte, 2048)).Line())
	require.Equal(t, "3 bytes, binary, base64: G1sy", describePayload([]byte("\x1b[2")).Line(), "an escape sequence is not text")

	long := strings.Repeat("é", 60)
	p := previewPayload([]byte(long))
	require.Equal(t, strings.Repeat("é", previewRunes), p.Preview)
	require.True(t, p.Truncated)
	require.Equal(t, `120 bytes, text: "`+strings.Repeat("é", previewRunes)+`"…`, p.Line())
	b := previewPayload(bytes.Repeat([]byte{0xff}, 100))
	require.Equal(t, "binary", b.Kind)
	require.True(t, b.Truncated)
	require.Len(t, b.Preview, 64) // base64 of 48 bytes

	var out bytes.Buffer
	require.NoError(t, WriteJSON(&out, &ExecutionPage{Items: []ExecutionSummary{{ID: "<a&b>"}}}))
	require.Contains(t, out.String(), `"id": "<a&b>"`, "no HTML escaping")
}

// TestPayloadShapes checks that a payload has one JSON shape wherever it is stored: a BSON
// document is a JSON object under "json" as the snapshot and as an outbox event alike, and
// each kind carries only its own field.
func TestPayloadShapes(t *testing.T) {
	doc, err := bson.Marshal(bson.D{{Key: "state", Value: "paid"}, {Key: "total", Value: int32(42)}})
	require.NoError(t, err)
	shapes := map[string]struct {
		b    []byte
		want string
	}{
		"bson":   {doc, `{"bytes": 32, "kind": "bson", "json": {"state": "paid", "total": 42}}`},
		"json":   {[]byte(`{"a": 1}`), `{"bytes": 8, "kind": "json", "json": {"a": 1}}`},
		"text":   {[]byte("hi"), `{"bytes": 2, "kind": "text", "text": "hi"}`},
		"binary": {[]byte{0xff, 0}, `{"bytes": 2, "kind": "binary", "base64": "/wA="}`},
		"big":    {make([]byte, 2048), `{"bytes": 2048, "kind": "binary"}`},
		"empty":  {nil, `{"bytes": 0, "kind": "empty"}`},
	}
	for name, c := range shapes {
		snapshot, err := json.Marshal(describePayload(c.b))
		require.NoError(t, err)
		require.JSONEq(t, c.want, string(snapshot), name)
		entries, err := outboxOf(rawDoc(t, bson.D{{Key: ops.FieldOutbox, Value: bson.D{
			{Key: "7", Value: bson.D{{Key: "seq", Value: int64(7)}, {Key: "v", Value: int64(1)}, {Key: "event", Value: bson.Binary{Data: c.b}}}},
		}}}))
		require.NoError(t, err)
		require.Len(t, entries, 1)
		event, err := json.Marshal(entries[0])
		require.NoError(t, err)
		require.JSONEq(t, `{"seq": 7, "version": 1, "event": `+c.want+`}`, string(event), name)
	}
	require.Equal(t, `32 bytes, BSON: {"state":"paid","total":42}`, describePayload(doc).Line())
	require.Equal(t, "bson", classify(doc))
	require.Equal(t, "binary", classify(doc[:len(doc)-1]), "a truncated document is not one")
}

// TestBSONFields checks that trace steps and spawn contexts print as JSON with sorted keys,
// whatever order they were stored in.
func TestBSONFields(t *testing.T) {
	b, err := contract.EncodeMap(map[string]any{"z": 1, "a": map[string]any{"y.$": true, "b": []any{"x", 2.5}}})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"b":["x",2.5],"y.$":true},"z":1}`, string(bsonFields(b)))
	require.True(t, json.Valid(bsonFields([]byte{1, 2, 3})))
}

// TestCursorOrID checks -after: a cursor as printed, or else an execution id.
func TestCursorOrID(t *testing.T) {
	require.Equal(t, "order-2", AfterID(contract.EncodeCursor("order-2")))
	require.Equal(t, "order-2", AfterID("order-2"))
	require.Equal(t, "", AfterID(""))
}

// TestTimes checks how times are written: RFC 3339 in UTC, milliseconds when there are any.
func TestTimes(t *testing.T) {
	require.Equal(t, "2030-03-17T17:46:40Z", FormatTime(time.Unix(1_900_000_000, 0)))
	require.Equal(t, "2030-03-17T17:46:40.250Z", FormatTime(time.Unix(1_900_000_000, 250_000_000)))
}
