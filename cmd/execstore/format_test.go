package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// TestDurations checks how far from now a time is written: the largest unit and the next.
func TestDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                      "now",
		400 * time.Millisecond: "now",
		45 * time.Second:       "in 45s",
		-45 * time.Second:      "45s ago",
		1000 * time.Second:     "in 16m40s",
		2 * time.Hour:          "in 2h",
		time.Hour + 16*time.Minute + 40*time.Second: "in 1h16m",
		-(76*time.Hour + 12*time.Minute):            "3d4h ago",
		24*time.Hour + 5*time.Minute:                "in 1d",
	} {
		require.Equal(t, want, fromNow(d), d)
	}
	require.Equal(t, "2030-03-17T17:46:40Z", formatTime(time.Unix(1_900_000_000, 0)))
	require.Equal(t, "2030-03-17T17:46:40.250Z", formatTime(time.Unix(1_900_000_000, 250_000_000)))
}

// TestPayloads checks how opaque bytes are shown: JSON as JSON, text as a quoted string,
// binary as base64 up to 1 KiB and as a size past it; previews cut at a rune boundary.
func TestPayloads(t *testing.T) {
	require.Equal(t, "0 bytes", describePayload(nil).text())
	require.Equal(t, `22 bytes, JSON: {"a":[1,2],"b":"x"}`, describePayload([]byte(`{"a": [1, 2], "b":"x"}`)).text())
	require.Equal(t, `12 bytes, text: "two\nlines é"`, describePayload([]byte("two\nlines é")).text())
	require.Equal(t, "1 byte, binary, base64: AA==", describePayload([]byte{0}).text())
	require.Equal(t, "2048 bytes, binary (not shown past 1024 bytes)", describePayload(make([]byte, 2048)).text())
	require.Equal(t, "3 bytes, binary, base64: G1sy", describePayload([]byte("\x1b[2")).text(), "an escape sequence is not text")

	long := strings.Repeat("é", 60)
	p := previewPayload([]byte(long))
	require.Equal(t, strings.Repeat("é", previewRunes), p.Preview)
	require.True(t, p.Truncated)
	require.Equal(t, `120 bytes, text: "`+strings.Repeat("é", previewRunes)+`"…`, p.text())
	b := previewPayload(bytes.Repeat([]byte{0xff}, 100))
	require.Equal(t, "binary", b.Kind)
	require.True(t, b.Truncated)
	require.Len(t, b.Preview, 64) // base64 of 48 bytes

	var out bytes.Buffer
	require.NoError(t, emit(&out, output{JSON: true}, &listReport{Items: []summary{{ID: "<a&b>"}}}))
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
	require.Equal(t, `32 bytes, BSON: {"state":"paid","total":42}`, describePayload(doc).text())
	require.Equal(t, "bson", classify(doc))
	require.Equal(t, "binary", classify(doc[:len(doc)-1]), "a truncated document is not one")
}

// TestPlain checks that text output quotes what could break a line or the terminal.
func TestPlain(t *testing.T) {
	require.Equal(t, "order-1", plain("order-1"))
	require.Equal(t, "a b", plain("a b"))
	require.Equal(t, `""`, plain(""))
	require.Equal(t, `"a\tb"`, plain("a\tb"))
	require.Equal(t, `"x\x1b[31m"`, plain("x\x1b[31m"))
	require.Equal(t, `"\xff"`, plain("\xff"))
	require.Equal(t, "-", orDash(""))
}

// TestBSONFields checks that trace steps and spawn contexts print as JSON with sorted keys,
// whatever order they were stored in.
func TestBSONFields(t *testing.T) {
	b, err := contract.EncodeMap(map[string]any{"z": 1, "a": map[string]any{"y.$": true, "b": []any{"x", 2.5}}})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"b":["x",2.5],"y.$":true},"z":1}`, string(bsonFields(b)))
	require.True(t, json.Valid(bsonFields([]byte{1, 2, 3})))
}

// TestInterleavedFlags checks that flags are read before and after the arguments, and that
// "--" ends them.
func TestInterleavedFlags(t *testing.T) {
	parse := func(args ...string) (bool, int, []string) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		j := fs.Bool("json", false, "")
		n := fs.Int("trace", 10, "")
		pos, err := parseInterleaved(fs, args)
		require.NoError(t, err)
		return *j, *n, pos
	}
	j, n, pos := parse("order-1", "-json", "-trace", "3")
	require.Equal(t, []any{true, 3, []string{"order-1"}}, []any{j, n, pos})
	j, n, pos = parse("-trace", "2", "a", "b", "-json")
	require.Equal(t, []any{true, 2, []string{"a", "b"}}, []any{j, n, pos})
	j, _, pos = parse("--", "-json", "x")
	require.Equal(t, []any{false, []string{"-json", "x"}}, []any{j, pos})
	_, _, pos = parse("a", "--", "-trace")
	require.Equal(t, []string{"a", "-trace"}, pos)
}

// TestStatusFlag checks -status: comma lists, repeats, any case.
func TestStatusFlag(t *testing.T) {
	var s statusList
	require.NoError(t, s.Set("running, Done"))
	require.NoError(t, s.Set("FAILED"))
	require.Equal(t, "RUNNING,DONE,FAILED", s.String())
	require.ErrorContains(t, s.Set("runing"), `unknown status "runing"`)
}

// TestCursorOrID checks -after: a cursor as printed, or else an execution id.
func TestCursorOrID(t *testing.T) {
	require.Equal(t, "order-2", afterID(contract.EncodeCursor("order-2")))
	require.Equal(t, "order-2", afterID("order-2"))
	require.Equal(t, "", afterID(""))
}

// TestRedaction checks that an address is found in any URI and that credentials never
// survive in a message.
func TestRedaction(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://h1:27017,h2:27018/db?replicaSet=rs": "h1:27017,h2:27018",
		"mongodb://user:p%40ss@host:1/?authSource=x":   "host:1",
		"mongodb://user:pa/ss@host:1/db":               "host:1",
		"mongodb+srv://u:p@cluster.example.net":        "cluster.example.net",
		"host-only":                                    "host-only",
		"mongodb://":                                   "(no host)",
	} {
		require.Equal(t, want, hostsOf(uri), uri)
	}
	uri := "mongodb://operator:p%40ss@host:1/?tlsCertificateKeyFilePassword=kf-secret"
	msg := redact("failed for "+uri+" as operator with p%40ss / p@ss and kf-secret", uri)
	for _, secret := range []string{"operator", "p%40ss", "p@ss", "kf-secret"} {
		require.NotContains(t, msg, secret)
	}
}
