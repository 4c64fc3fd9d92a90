package testserver

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// RouterProxy relays wire-protocol messages to upstream and adds msg: "isdbgrid" to every
// hello reply, so that the driver takes the server for a mongos (a router of a sharded
// cluster). Against a standalone server the driver sends no read preference at all; to a
// router it sends every one but primary as $readPreference, so the read preference an
// operation was given can be read off the command it sends. Every command still runs on the
// real server behind it.
//
// A replica set member (MONGODB_URI) stays one whatever msg says, since its hello names its
// set: the driver then leaves the proxy for the members the set lists, and sends every read
// preference but primary to them as it would to a router. The test holds there too.
type RouterProxy struct{ *Relay }

// NewRouterProxy starts a RouterProxy to upstream (host:port), stopped when t ends.
func NewRouterProxy(t testing.TB, upstream string) *RouterProxy {
	p := &RouterProxy{Relay: NewRelay(t, "127.0.0.1:0", upstream)}
	p.Start(func(client, server net.Conn) {
		p.Go(func() { defer server.Close(); _, _ = io.Copy(server, client) })
		defer client.Close()
		relayReplies(client, server)
	})
	return p
}

// URI is a URI of the proxy with query.
func (p *RouterProxy) URI(query string) string {
	return "mongodb://" + p.Addr() + "/?" + query
}

const (
	opReply = 1    // OP_REPLY: the answer to the driver's first, legacy hello
	opMsg   = 2013 // OP_MSG
)

// relayReplies copies the server's messages to the client, rewriting hello replies.
func relayReplies(dst io.Writer, src io.Reader) {
	r := bufio.NewReader(src)
	for {
		var header [16]byte
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return
		}
		body := make([]byte, int(binary.LittleEndian.Uint32(header[:4]))-16)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		msg := append(header[:], body...)
		if rewritten, ok := asRouterHello(msg); ok {
			msg = rewritten
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

// asRouterHello returns msg with msg: "isdbgrid" added to its document when it is a hello
// reply (an OP_MSG with one body section, or an OP_REPLY with one document).
func asRouterHello(msg []byte) ([]byte, bool) {
	var prefix, doc []byte
	switch binary.LittleEndian.Uint32(msg[12:16]) {
	case opMsg:
		flags := binary.LittleEndian.Uint32(msg[16:20])
		if flags&1 != 0 || msg[20] != 0 { // a checksum, or no body section first
			return nil, false
		}
		prefix, doc = msg[:21], msg[21:]
	case opReply:
		if binary.LittleEndian.Uint32(msg[32:36]) != 1 {
			return nil, false
		}
		prefix, doc = msg[:36], msg[36:]
	default:
		return nil, false
	}
	raw := bson.Raw(doc)
	if raw.Validate() != nil || len(doc) != int(binary.LittleEndian.Uint32(doc[:4])) {
		return nil, false
	}
	if _, err := raw.LookupErr("maxWireVersion"); err != nil {
		return nil, false
	}
	var d bson.D
	if bson.Unmarshal(doc, &d) != nil {
		return nil, false
	}
	d = append(d, bson.E{Key: "msg", Value: "isdbgrid"})
	newDoc, err := bson.Marshal(d)
	if err != nil {
		return nil, false
	}
	out := append(append([]byte(nil), prefix...), newDoc...)
	binary.LittleEndian.PutUint32(out[:4], uint32(len(out)))
	return out, true
}
