package embedded

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// docSeq is a kind-1 section of an OP_MSG.
type docSeq struct {
	id   string
	docs []bsoncore.Document
}

// opMsg builds an OP_MSG: flags, then the kind-1 sections in before, the kind-0 section
// holding cmd, and the kind-1 sections in after.
func opMsg(requestID, responseTo int32, flags wiremessage.MsgFlag, cmd bsoncore.Document, before, after []docSeq) []byte {
	idx, m := wiremessage.AppendHeaderStart(nil, requestID, responseTo, wiremessage.OpMsg)
	m = wiremessage.AppendMsgFlags(m, flags)
	appendSeq := func(s docSeq) {
		m = wiremessage.AppendMsgSectionType(m, wiremessage.DocumentSequence)
		var sidx int32
		sidx, m = bsoncore.ReserveLength(m)
		m = append(m, s.id...)
		m = append(m, 0)
		for _, d := range s.docs {
			m = append(m, d...)
		}
		m = bsoncore.UpdateLength(m, sidx, int32(len(m[sidx:])))
	}
	for _, s := range before {
		appendSeq(s)
	}
	m = wiremessage.AppendMsgSectionType(m, wiremessage.SingleDocument)
	m = append(m, cmd...)
	for _, s := range after {
		appendSeq(s)
	}
	if flags&wiremessage.ChecksumPresent != 0 {
		m = append(m, 0xde, 0xad, 0xbe, 0xef) // the front does not check it
	}
	return bsoncore.UpdateLength(m, idx, int32(len(m[idx:])))
}

// command is an OP_MSG request carrying cmd and nothing else.
func command(requestID int32, flags wiremessage.MsgFlag, cmd bsoncore.Document) []byte {
	return opMsg(requestID, 0, flags, cmd, nil, nil)
}

// opQuery builds a legacy OP_QUERY on namespace ns.
func opQuery(requestID int32, ns string, query bsoncore.Document) []byte {
	idx, m := wiremessage.AppendHeaderStart(nil, requestID, 0, opCodeQuery)
	m = binary.LittleEndian.AppendUint32(m, 0) // flags
	m = append(m, ns...)
	m = append(m, 0)
	m = binary.LittleEndian.AppendUint32(m, 0)          // numberToSkip
	m = binary.LittleEndian.AppendUint32(m, ^uint32(0)) // numberToReturn: -1
	m = append(m, query...)
	return bsoncore.UpdateLength(m, idx, int32(len(m[idx:])))
}

// doc builds {name: 1, $db: "test", extra...}.
func doc(name string, extra ...func(*bsoncore.DocumentBuilder)) bsoncore.Document {
	return docIn("test", name, extra...)
}

// docIn builds the command document {name: 1, extra..., $db: database}.
func docIn(database, name string, extra ...func(*bsoncore.DocumentBuilder)) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendInt32(name, 1)
	for _, e := range extra {
		e(b)
	}
	return b.AppendString("$db", database).Build()
}

// pipeline adds a pipeline of one-key stages to an aggregate command.
func pipeline(stages ...string) func(*bsoncore.DocumentBuilder) {
	return func(b *bsoncore.DocumentBuilder) {
		arr := bsoncore.NewArrayBuilder()
		for _, s := range stages {
			arr.AppendDocument(bsoncore.NewDocumentBuilder().AppendString(s, "x").Build())
		}
		b.AppendArray("pipeline", arr.Build())
	}
}

func TestParseHeader(t *testing.T) {
	msg := command(42, 0, doc("ping"))
	h, err := parseHeader(msg)
	require.NoError(t, err)
	assert.Equal(t, header{length: int32(len(msg)), requestID: 42, responseTo: 0, opCode: wiremessage.OpMsg}, h)

	reply := opMsg(7, 42, 0, doc("ok"), nil, nil)
	h, err = parseHeader(reply)
	require.NoError(t, err)
	assert.Equal(t, int32(7), h.requestID)
	assert.Equal(t, int32(42), h.responseTo)

	for name, b := range map[string][]byte{
		"short":     msg[:15],
		"length 15": withLength(msg, 15),
		"length -1": withLength(msg, -1),
		"too long":  withLength(msg, maxMessageLen+1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseHeader(b)
			assert.ErrorIs(t, err, errMalformed)
		})
	}
}

// withLength returns a copy of msg whose header claims length n.
func withLength(msg []byte, n int32) []byte {
	b := bytes.Clone(msg)
	binary.LittleEndian.PutUint32(b, uint32(n))
	return b
}

func TestReadMessage(t *testing.T) {
	first := command(1, 0, doc("find"))
	second := opMsg(2, 0, 0, doc("insert"), nil, []docSeq{{"documents", []bsoncore.Document{doc("a"), doc("b")}}})
	stream := append(bytes.Clone(first), second...)

	r := bufio.NewReader(bytes.NewReader(stream))
	var buf []byte
	got, err := readMessage(r, buf)
	require.NoError(t, err)
	assert.Equal(t, first, got)
	got, err = readMessage(r, reusable(got))
	require.NoError(t, err)
	assert.Equal(t, second, got, "messages are framed by their length, whatever the buffer held")
	_, err = readMessage(r, nil)
	assert.ErrorIs(t, err, io.EOF, "a stream that ends between messages ends with io.EOF")

	t.Run("truncated body", func(t *testing.T) {
		_, err := readMessage(bufio.NewReader(bytes.NewReader(first[:len(first)-1])), nil)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("truncated header", func(t *testing.T) {
		_, err := readMessage(bufio.NewReader(bytes.NewReader(first[:10])), nil)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("bad length", func(t *testing.T) {
		_, err := readMessage(bufio.NewReader(bytes.NewReader(withLength(first, maxMessageLen+1))), nil)
		assert.ErrorIs(t, err, errMalformed)
	})
}

func TestMoreToCome(t *testing.T) {
	assert.False(t, moreToCome(command(1, 0, doc("insert"))))
	assert.True(t, moreToCome(command(1, wiremessage.MoreToCome, doc("insert"))))
	assert.True(t, moreToCome(command(1, wiremessage.MoreToCome|wiremessage.ExhaustAllowed, doc("hello"))))
	assert.False(t, moreToCome(command(1, wiremessage.ExhaustAllowed, doc("hello"))))
	assert.False(t, moreToCome(opQuery(1, "admin.$cmd", doc("isMaster"))), "only OP_MSG has the flag")

	req, err := classify(command(9, wiremessage.MoreToCome|wiremessage.ChecksumPresent, doc("update")))
	require.NoError(t, err)
	assert.True(t, req.moreToCome)
	assert.True(t, req.write)
}

func TestClassify(t *testing.T) {
	one := []bsoncore.Document{doc("x")}
	tests := []struct {
		name    string
		msg     []byte
		command string
		write   bool
	}{
		{"find", command(1, 0, doc("find")), "find", false},
		{"getMore", command(1, 0, doc("getMore")), "getMore", false},
		{"hello", command(1, 0, doc("hello")), "hello", false},
		{"ismaster lower case", command(1, 0, doc("ismaster")), "ismaster", false},
		{"case-insensitive", command(1, 0, doc("BuildInfo")), "BuildInfo", false},
		{"saslStart", command(1, 0, doc("saslStart")), "saslStart", false},
		{"endSessions", command(1, 0, doc("endSessions")), "endSessions", false},
		{"aggregate", command(1, 0, doc("aggregate", pipeline("$match", "$project"))), "aggregate", false},
		{"aggregate $out", command(1, 0, doc("aggregate", pipeline("$match", "$out"))), "aggregate", true},
		{"aggregate $merge", command(1, 0, doc("aggregate", pipeline("$merge"))), "aggregate", true},
		{"insert", command(1, 0, doc("insert")), "insert", true},
		{"update", command(1, 0, doc("update")), "update", true},
		{"delete", command(1, 0, doc("delete")), "delete", true},
		{"findAndModify", command(1, 0, doc("findAndModify")), "findAndModify", true},
		{"createIndexes", command(1, 0, doc("createIndexes")), "createIndexes", true},
		{"drop", command(1, 0, doc("drop")), "drop", true},
		{"unknown command", command(1, 0, doc("frobnicate")), "frobnicate", true},
		{"kind-1 section after", opMsg(1, 0, 0, doc("insert"), nil, []docSeq{{"documents", one}}), "insert", true},
		{"kind-1 section before", opMsg(1, 0, 0, doc("find"), []docSeq{{"documents", one}}, nil), "find", false},
		{"checksum", command(1, wiremessage.ChecksumPresent, doc("count")), "count", false},
		{"OP_QUERY isMaster", opQuery(1, "admin.$cmd", doc("isMaster")), "isMaster", false},
		{"OP_QUERY wrapped", opQuery(1, "admin.$cmd", bsoncore.NewDocumentBuilder().
			AppendDocument("$query", doc("hello")).Build()), "hello", false},
		{"OP_QUERY command write", opQuery(1, "test.$cmd", doc("insert")), "insert", true},
		{"OP_QUERY on a collection", opQuery(1, "test.coll", bsoncore.NewDocumentBuilder().Build()), "find", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := classify(tt.msg)
			require.NoError(t, err)
			assert.Equal(t, tt.command, req.command)
			assert.Equal(t, tt.write, req.write)
			assert.Equal(t, int32(1), req.requestID)
		})
	}
}

// classify reads the database a command names: an OP_MSG's $db, an OP_QUERY's namespace.
func TestClassifyDatabase(t *testing.T) {
	noDB := bsoncore.NewDocumentBuilder().AppendInt32("insert", 1).Build()
	tests := []struct {
		name     string
		msg      []byte
		database string
	}{
		{"OP_MSG", command(1, 0, docIn("leases", "update")), "leases"},
		{"OP_MSG read", command(1, 0, docIn("data", "find")), "data"},
		{"OP_MSG without $db", command(1, 0, noDB), ""},
		{"OP_QUERY command", opQuery(1, "admin.$cmd", noDB), "admin"},
		{"OP_QUERY on a collection", opQuery(1, "data.coll", bsoncore.NewDocumentBuilder().Build()), "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := classify(tt.msg)
			require.NoError(t, err)
			assert.Equal(t, tt.database, req.database)
		})
	}
}

func TestClassifyReadList(t *testing.T) {
	reads := []string{
		"find", "aggregate", "count", "distinct", "getMore", "killCursors", "hello", "isMaster",
		"ismaster", "ping", "buildInfo", "buildinfo", "listCollections", "listIndexes",
		"listDatabases", "endSessions", "getParameter", "serverStatus", "connectionStatus",
		"saslStart", "saslContinue", "explain", "dbStats", "collStats", "getLog", "hostInfo",
		"whatsmyuri", "getCmdLineOpts", "getFreeMonitoringStatus", "dataSize", "validate",
		"currentOp",
	}
	for _, name := range reads {
		req, err := classify(command(1, 0, doc(name)))
		require.NoError(t, err)
		assert.False(t, req.write, name)
	}
	writes := []string{
		"insert", "update", "delete", "findAndModify", "bulkWrite", "create", "createIndexes",
		"drop", "dropDatabase", "dropIndexes", "renameCollection", "collMod", "createUser",
		"dropAllUsersFromDatabase", "setFreeMonitoring", "compact", "reIndex", "shutdown",
	}
	for _, name := range writes {
		req, err := classify(command(1, 0, doc(name)))
		require.NoError(t, err)
		assert.True(t, req.write, name)
	}
}

func TestClassifyRefuses(t *testing.T) {
	valid := command(1, 0, doc("find"))
	compressed := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(compressed[12:], uint32(wiremessage.OpCompressed))
	legacyInsert := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(legacyInsert[12:], uint32(wiremessage.OpInsert))

	tests := map[string][]byte{
		"OP_COMPRESSED":       compressed,
		"OP_INSERT":           legacyInsert,
		"length mismatch":     withLength(valid, int32(len(valid)+1)),
		"no sections":         command(1, 0, nil)[:headerLen+4],
		"only kind-1":         onlyKind1(),
		"two kind-0 sections": twoKind0(),
		"unknown kind":        unknownKind(),
		"truncated document":  truncatedDoc(),
		"empty command":       command(1, 0, bsoncore.NewDocumentBuilder().Build()),
		"OP_QUERY truncated":  opQuery(1, "admin.$cmd", doc("isMaster"))[:headerLen+10],
	}
	for name, msg := range tests {
		t.Run(name, func(t *testing.T) {
			if int(binary.LittleEndian.Uint32(msg)) != len(msg) && name != "length mismatch" {
				binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
			}
			_, err := classify(msg)
			assert.True(t, errors.Is(err, errMalformed), "got %v", err)
		})
	}
}

func onlyKind1() []byte {
	m := opMsg(1, 0, 0, doc("insert"), nil, []docSeq{{"documents", []bsoncore.Document{doc("x")}}})
	// Cut the kind-0 section out: header, flags, then the kind-1 section that followed it.
	kind0 := 1 + len(doc("insert"))
	out := append(bytes.Clone(m[:headerLen+4]), m[headerLen+4+kind0:]...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

func twoKind0() []byte {
	m := command(1, 0, doc("find"))
	m = append(m, byte(wiremessage.SingleDocument))
	m = append(m, doc("insert")...)
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}

func unknownKind() []byte {
	m := command(1, 0, doc("find"))
	m = append(m, 7)
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}

func truncatedDoc() []byte {
	m := command(1, 0, doc("find"))
	m = m[:len(m)-3]
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}
