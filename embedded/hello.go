package embedded

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// helloTimeout bounds one readiness check when ctx has no earlier deadline.
const helloTimeout = 2 * time.Second

// dialFunc opens a connection to the front.
type dialFunc func(ctx context.Context) (net.Conn, error)

func plainDial(addr string) dialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// tlsDial connects with TLS without verifying the certificate: it only checks that the
// server's own front, on loopback, completes a handshake and answers.
func tlsDial(addr string) dialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// hello connects through dial, sends {hello: 1} as an OP_MSG and checks that the reply says
// ok: 1. It is the readiness check of Start: a server that answers it accepts connections
// and runs commands.
func hello(ctx context.Context, dial dialFunc) error {
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(deadline); err != nil {
			return err
		}
	}

	requestID := wiremessage.NextRequestID()
	if _, err := c.Write(helloMessage(requestID)); err != nil {
		return err
	}
	reply, err := readMessage(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	h, err := parseHeader(reply)
	if err != nil {
		return err
	}
	if h.opCode != wiremessage.OpMsg || h.responseTo != requestID {
		return fmt.Errorf("%w: hello answered by opcode %d to request %d", errMalformed, h.opCode, h.responseTo)
	}
	doc, err := msgCommand(reply[headerLen:])
	if err != nil {
		return err
	}
	if ok, _ := doc.Lookup("ok").AsFloat64OK(); ok != 1 {
		return fmt.Errorf("hello failed: %s", doc)
	}
	return nil
}

// helloMessage returns an OP_MSG carrying {hello: 1, $db: "admin"}.
func helloMessage(requestID int32) []byte {
	idx, msg := wiremessage.AppendHeaderStart(nil, requestID, 0, wiremessage.OpMsg)
	msg = wiremessage.AppendMsgFlags(msg, 0)
	msg = wiremessage.AppendMsgSectionType(msg, wiremessage.SingleDocument)
	msg = append(msg, bsoncore.NewDocumentBuilder().
		AppendInt32("hello", 1).
		AppendString("$db", "admin").
		Build()...)
	return bsoncore.UpdateLength(msg, idx, int32(len(msg[idx:])))
}
