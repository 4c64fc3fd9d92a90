package embedded

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// This file reads MongoDB wire messages off a stream and classifies requests as reads or
// writes. It looks at no more than the front needs: the 16-byte header every message starts
// with, the OP_MSG flags, the section kinds, the first key of the command document (the
// command name) and the database the command names ($db, or an OP_QUERY's namespace).
// Everything else passes through untouched.

const (
	// headerLen is the size of the header that frames every message in both directions:
	// int32 messageLength (header included), requestID, responseTo, opCode, little-endian.
	headerLen = 16

	// maxMessageLen is the largest message accepted, FerretDB's maxMessageSizeBytes
	// (the same as MongoDB's).
	maxMessageLen = 48_000_000
)

// opCodeQuery is OP_QUERY, which MongoDB deprecated for everything but the first hello
// of a connection: the driver still opens every connection with an OP_QUERY isMaster.
const opCodeQuery wiremessage.OpCode = 2004

// errMalformed reports a message the front cannot frame or classify.
var errMalformed = errors.New("malformed wire message")

// header is the fixed header of a wire message.
type header struct {
	length     int32
	requestID  int32
	responseTo int32
	opCode     wiremessage.OpCode
}

// parseHeader reads the header at the start of msg.
func parseHeader(msg []byte) (header, error) {
	length, requestID, responseTo, opCode, _, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return header{}, fmt.Errorf("%w: %d bytes, shorter than a header", errMalformed, len(msg))
	}
	if length < headerLen || length > maxMessageLen {
		return header{}, fmt.Errorf("%w: length %d out of range [%d, %d]", errMalformed, length, headerLen, maxMessageLen)
	}
	return header{length: length, requestID: requestID, responseTo: responseTo, opCode: opCode}, nil
}

// readMessage reads one whole message (header included) from r. It reuses buf when it is
// large enough. An error that is not io.EOF at a message boundary means the stream is
// broken and the connection must be dropped.
func readMessage(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return nil, err
	}
	n := int(h.length)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	copy(buf, hb[:])
	if _, err := io.ReadFull(r, buf[headerLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// moreToCome reports whether msg is an OP_MSG with the moreToCome flag set. On a request
// it means the client expects no reply; on a reply it means another reply follows without
// a request (exhaust cursors, streaming hello).
func moreToCome(msg []byte) bool {
	return wiremessage.IsMsgMoreToCome(msg)
}

// request is what the front needs to know about a client message.
type request struct {
	requestID  int32
	opCode     wiremessage.OpCode
	command    string // the command name; "" when there is none (an unknown opcode)
	database   string // the database the command runs on; "" when it names none
	write      bool   // whether it must hold its database's write slot
	moreToCome bool   // OP_MSG sent with moreToCome: the client reads no reply to it

	// slot is the write slot the request holds, set by the front when it takes it.
	slot chan struct{}
	// answer, when set, is the reply the client gets instead of FerretDB's: the front's
	// check answered the request, and the front forwarded a ping in its place.
	answer []byte
	// settle, when set, is the check's verdict.settle for the forwarded request.
	settle func(reply bsoncore.Document)
}

// classify tells what msg, a whole request message, is. Requests that cannot be parsed
// return an error; the front drops the connection rather than guess.
//
// Only OP_MSG and OP_QUERY are accepted: FerretDB answers no other opcode (it closes the
// connection on reading one), the driver never sends legacy opcodes, and it only sends
// OP_COMPRESSED after the server's hello offers a compressor, which FerretDB's never does.
func classify(msg []byte) (request, error) {
	h, err := parseHeader(msg)
	if err != nil {
		return request{}, err
	}
	if int(h.length) != len(msg) {
		return request{}, fmt.Errorf("%w: header says %d bytes, message has %d", errMalformed, h.length, len(msg))
	}
	req := request{requestID: h.requestID, opCode: h.opCode}
	var doc bsoncore.Document
	switch h.opCode {
	case wiremessage.OpMsg:
		req.moreToCome = moreToCome(msg)
		doc, err = msgCommand(msg[headerLen:])
	case opCodeQuery:
		doc, req.database, err = queryCommand(msg[headerLen:])
	default:
		return request{}, fmt.Errorf("%w: unsupported opcode %d", errMalformed, h.opCode)
	}
	if err != nil {
		return request{}, err
	}
	if doc == nil {
		// A legacy OP_QUERY on a collection (not on $cmd) is a find.
		req.command = "find"
		return req, nil
	}
	req.command, err = firstKey(doc)
	if err != nil {
		return request{}, err
	}
	if h.opCode == wiremessage.OpMsg {
		req.database, _ = doc.Lookup("$db").StringValueOK()
	}
	req.write = isWrite(req.command, doc)
	return req, nil
}

// msgCommand returns the command document of an OP_MSG body (the message after its header):
// flagBits, then sections, then a checksum when the checksumPresent flag is set. The kind-0
// section holds the command; kind-1 sections (document sequences such as insert's documents)
// are skipped whole.
func msgCommand(body []byte) (bsoncore.Document, error) {
	flags, rem, ok := wiremessage.ReadMsgFlags(body)
	if !ok {
		return nil, fmt.Errorf("%w: OP_MSG without flagBits", errMalformed)
	}
	if flags&wiremessage.ChecksumPresent != 0 {
		if len(rem) < 4 {
			return nil, fmt.Errorf("%w: OP_MSG checksum missing", errMalformed)
		}
		rem = rem[:len(rem)-4]
	}
	var command bsoncore.Document
	for len(rem) > 0 {
		var kind wiremessage.SectionType
		kind, rem, _ = wiremessage.ReadMsgSectionType(rem)
		switch kind {
		case wiremessage.SingleDocument:
			var doc bsoncore.Document
			doc, rem, ok = wiremessage.ReadMsgSectionSingleDocument(rem)
			if !ok {
				return nil, fmt.Errorf("%w: OP_MSG kind-0 section truncated", errMalformed)
			}
			if command != nil {
				return nil, fmt.Errorf("%w: OP_MSG with two kind-0 sections", errMalformed)
			}
			command = doc
		case wiremessage.DocumentSequence:
			_, _, rem, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rem)
			if !ok {
				return nil, fmt.Errorf("%w: OP_MSG kind-1 section truncated", errMalformed)
			}
		default:
			return nil, fmt.Errorf("%w: OP_MSG section kind %d", errMalformed, kind)
		}
	}
	if command == nil {
		return nil, fmt.Errorf("%w: OP_MSG without a kind-0 section", errMalformed)
	}
	return command, nil
}

// queryCommand returns the command document of an OP_QUERY body (the message after its
// header) and the database its namespace names: int32 flags, cstring fullCollectionName,
// int32 numberToSkip, int32 numberToReturn, query document, optional field selector. Only a query on a
// "<db>.$cmd" namespace is a command; for any other it returns a nil document. A command
// wrapped as {$query: {...}, $readPreference: ...} is unwrapped.
func queryCommand(body []byte) (bsoncore.Document, string, error) {
	if len(body) < 4 {
		return nil, "", fmt.Errorf("%w: OP_QUERY without flags", errMalformed)
	}
	ns, rem, ok := bsoncore.ReadKey(body[4:])
	if !ok || len(rem) < 8 {
		return nil, "", fmt.Errorf("%w: OP_QUERY namespace truncated", errMalformed)
	}
	doc, _, ok := bsoncore.ReadDocument(rem[8:])
	if !ok {
		return nil, "", fmt.Errorf("%w: OP_QUERY query truncated", errMalformed)
	}
	db, _, _ := strings.Cut(ns, ".")
	if !strings.HasSuffix(ns, ".$cmd") {
		return nil, db, nil
	}
	if inner, ok := doc.Lookup("$query").DocumentOK(); ok {
		doc = inner
	}
	return doc, db, nil
}

// firstKey returns the name of the first element of doc: a command's name.
func firstKey(doc bsoncore.Document) (string, error) {
	elem, err := doc.IndexErr(0)
	if err != nil {
		return "", fmt.Errorf("%w: command document: %v", errMalformed, err)
	}
	key, err := elem.KeyErr()
	if err != nil {
		return "", fmt.Errorf("%w: command document: %v", errMalformed, err)
	}
	if key == "" {
		return "", fmt.Errorf("%w: command document has an empty first key", errMalformed)
	}
	return key, nil
}

// readCommands are the commands known to change no data, lower-cased. Every other command
// is a write.
var readCommands = func() map[string]struct{} {
	names := []string{
		"find", "aggregate", "count", "distinct", "getMore", "killCursors",
		"hello", "isMaster", "ping", "buildInfo",
		"listCollections", "listIndexes", "listDatabases", "endSessions",
		"getParameter", "serverStatus", "connectionStatus", "saslStart", "saslContinue",
		"explain", "dbStats", "collStats", "getLog", "hostInfo", "whatsmyuri",
		"getCmdLineOpts", "getFreeMonitoringStatus", "dataSize", "validate", "currentOp",
	}
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = struct{}{}
	}
	return m
}()

// isWrite reports whether the command named name, with command document doc, must hold
// the write slot: every command not known to be a read, and an aggregate whose pipeline
// writes ($out or $merge).
func isWrite(name string, doc bsoncore.Document) bool {
	name = strings.ToLower(name)
	if _, ok := readCommands[name]; !ok {
		return true
	}
	return name == "aggregate" && pipelineWrites(doc)
}

// pipelineWrites reports whether an aggregate command's pipeline has a $out or $merge
// stage. A pipeline it cannot read counts as writing.
func pipelineWrites(doc bsoncore.Document) bool {
	v, err := doc.LookupErr("pipeline")
	if err != nil {
		return false // no pipeline: the server refuses the command
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return true
	}
	stages, err := arr.Values()
	if err != nil {
		return true
	}
	for _, s := range stages {
		stage, ok := s.DocumentOK()
		if !ok {
			return true
		}
		op, err := firstKey(stage)
		if err != nil {
			return true
		}
		if op == "$out" || op == "$merge" {
			return true
		}
	}
	return false
}

// replyMessage returns an OP_MSG reply to request requestID carrying doc.
func replyMessage(requestID int32, doc bsoncore.Document) []byte {
	idx, msg := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), requestID, wiremessage.OpMsg)
	msg = wiremessage.AppendMsgFlags(msg, 0)
	msg = wiremessage.AppendMsgSectionType(msg, wiremessage.SingleDocument)
	msg = append(msg, doc...)
	return bsoncore.UpdateLength(msg, idx, int32(len(msg[idx:])))
}

// pingMessage returns an OP_MSG request {ping: 1, $db: database} with request id requestID,
// sent with moreToCome when moreToCome is set.
func pingMessage(requestID int32, database string, moreToCome bool) []byte {
	var flags wiremessage.MsgFlag
	if moreToCome {
		flags = wiremessage.MoreToCome
	}
	idx, msg := wiremessage.AppendHeaderStart(nil, requestID, 0, wiremessage.OpMsg)
	msg = wiremessage.AppendMsgFlags(msg, flags)
	msg = wiremessage.AppendMsgSectionType(msg, wiremessage.SingleDocument)
	msg = append(msg, bsoncore.NewDocumentBuilder().
		AppendInt32("ping", 1).
		AppendString("$db", database).
		Build()...)
	return bsoncore.UpdateLength(msg, idx, int32(len(msg[idx:])))
}

// replyDocument returns the command document of reply, an OP_MSG reply, or nil when it is
// not one.
func replyDocument(reply []byte) bsoncore.Document {
	h, err := parseHeader(reply)
	if err != nil || h.opCode != wiremessage.OpMsg {
		return nil
	}
	doc, err := msgCommand(reply[headerLen:])
	if err != nil {
		return nil
	}
	return doc
}
