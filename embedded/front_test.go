package embedded

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/internal/logtest"
)

// These tests run the front in front of fakeUpstream, a stand-in for FerretDB that answers
// as FerretDB does and records what it sees, so that the front's guarantees can be checked
// without a server and deterministically.

// ioTimeout bounds every read and write a test makes; none should come near it.
const ioTimeout = 10 * time.Second

// fakeUpstream answers every request on a connection with one OP_MSG {ok: 1}, in order, like
// FerretDB, including requests sent with moreToCome. Some commands behave specially:
//
//	hold       waits until release is closed, then answers
//	holdclose  waits until release is closed, then closes the connection without answering
//	die        closes the connection without answering
//	badreply   answers with a reply to another request id, then records "eof" when the
//	           front closes its side of the connection (or half-closes it)
//	hello   sent with exhaustAllowed: answers with a stream of three replies
//
// Every command the front classifies as a write takes a little time, long enough for
// overlapping writes to show in maxWrites.
type fakeUpstream struct {
	ln         net.Listener
	release    chan struct{}
	unholdOnce sync.Once
	wg         sync.WaitGroup

	writes    atomic.Int32 // writes being handled now
	maxWrites atomic.Int32 // the most writes ever handled at once
	received  atomic.Int32 // requests read

	mu     sync.Mutex
	events []string // "start cmd" and "end cmd", in order
	conns  []net.Conn
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &fakeUpstream{ln: ln, release: make(chan struct{})}
	u.wg.Add(1)
	go u.serve()
	return u
}

func (u *fakeUpstream) addr() string { return u.ln.Addr().String() }

// close stops the fake, releasing held commands, and waits for its goroutines.
func (u *fakeUpstream) close() {
	u.ln.Close()
	u.unhold()
	u.mu.Lock()
	for _, c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// unhold lets held commands answer.
func (u *fakeUpstream) unhold() {
	u.unholdOnce.Do(func() { close(u.release) })
}

func (u *fakeUpstream) record(e string) {
	u.mu.Lock()
	u.events = append(u.events, e)
	u.mu.Unlock()
}

func (u *fakeUpstream) eventLog() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.events...)
}

func (u *fakeUpstream) serve() {
	defer u.wg.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.conns = append(u.conns, c)
		u.mu.Unlock()
		u.wg.Add(1)
		go u.handle(c)
	}
}

func (u *fakeUpstream) handle(c net.Conn) {
	defer u.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	var replyID int32
	reply := func(responseTo int32, flags wiremessage.MsgFlag) error {
		replyID++
		_, err := c.Write(opMsg(replyID, responseTo, flags, bsoncore.NewDocumentBuilder().AppendDouble("ok", 1).Build(), nil, nil))
		return err
	}
	badReplied := false
	for {
		msg, err := readMessage(r, nil)
		if err != nil {
			if badReplied {
				u.record("eof")
			}
			return
		}
		u.received.Add(1)
		req, err := classify(msg)
		if err != nil {
			return
		}
		u.record("start " + req.command)
		if req.write {
			n := u.writes.Add(1)
			for m := u.maxWrites.Load(); n > m && !u.maxWrites.CompareAndSwap(m, n); m = u.maxWrites.Load() {
			}
			time.Sleep(time.Millisecond)
		}
		switch req.command {
		case "hold":
			<-u.release
		case "holdclose":
			<-u.release
			u.record("end holdclose")
			u.writes.Add(-1)
			return
		case "die":
			u.record("end die")
			u.writes.Add(-1)
			return
		}
		if req.write {
			u.writes.Add(-1)
		}
		u.record("end " + req.command)

		flags, _, _ := wiremessage.ReadMsgFlags(msg[headerLen:])
		if req.command == "hello" && flags&wiremessage.ExhaustAllowed != 0 {
			// A stream: each reply answers the one before it.
			if reply(req.requestID, wiremessage.MoreToCome) != nil ||
				reply(replyID, wiremessage.MoreToCome) != nil ||
				reply(replyID, 0) != nil {
				return
			}
			continue
		}
		if req.command == "badreply" {
			badReplied = true
			if reply(req.requestID+1000, 0) != nil {
				return
			}
			continue
		}
		if reply(req.requestID, 0) != nil {
			return
		}
	}
}

// startTestFront starts a front before upstream, and stops both when the test ends.
func startTestFront(t *testing.T, upstream *fakeUpstream) *front {
	t.Helper()
	return startTestFrontDrain(t, upstream, defaultDrainTimeout, slog.New(slog.DiscardHandler))
}

// startTestFrontDrain is startTestFront with the front's drainTimeout and logger.
func startTestFrontDrain(t *testing.T, upstream *fakeUpstream, drainTimeout time.Duration, log *slog.Logger) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := startFront(ln, upstream.addr(), drainTimeout, nil, log)
	t.Cleanup(func() {
		assert.NoError(t, f.close())
		upstream.close()
	})
	return f
}

// wireClient speaks the wire protocol over one connection.
type wireClient struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	nextID int32
}

func dialClient(t *testing.T, addr string) *wireClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &wireClient{t: t, c: c, r: bufio.NewReader(c)}
}

// send sends the command name with flags on database "test" and returns its request id.
func (w *wireClient) send(name string, flags wiremessage.MsgFlag) int32 {
	w.t.Helper()
	return w.sendTo("test", name, flags)
}

// sendTo sends the command name with flags on database and returns its request id.
func (w *wireClient) sendTo(database, name string, flags wiremessage.MsgFlag) int32 {
	w.t.Helper()
	w.nextID++
	require.NoError(w.t, w.c.SetWriteDeadline(time.Now().Add(ioTimeout)))
	_, err := w.c.Write(command(w.nextID, flags, docIn(database, name)))
	require.NoError(w.t, err)
	return w.nextID
}

// recv reads one reply, or returns the error that ended the connection.
func (w *wireClient) recv() (header, error) {
	w.t.Helper()
	require.NoError(w.t, w.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	msg, err := readMessage(w.r, nil)
	if err != nil {
		return header{}, err
	}
	return parseHeader(msg)
}

// call sends name and reads its reply.
func (w *wireClient) call(name string) {
	w.t.Helper()
	require.NoError(w.t, w.tryCall(name))
}

// tryCall sends name and reads its reply. Unlike call, it may run on any goroutine.
func (w *wireClient) tryCall(name string) error {
	w.nextID++
	if err := w.c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return err
	}
	if _, err := w.c.Write(command(w.nextID, 0, doc(name))); err != nil {
		return err
	}
	msg, err := readMessage(w.r, nil)
	if err != nil {
		return err
	}
	h, err := parseHeader(msg)
	if err != nil {
		return err
	}
	if h.responseTo != w.nextID {
		return fmt.Errorf("%s: reply to %d, want %d", name, h.responseTo, w.nextID)
	}
	return nil
}

// waitFor waits until cond holds, failing the test after ioTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func hasEvent(u *fakeUpstream, e string) func() bool {
	return func() bool {
		for _, x := range u.eventLog() {
			if x == e {
				return true
			}
		}
		return false
	}
}

// concurrentWrites has clients×perClient writes made at once to addr.
func concurrentWrites(t *testing.T, addr string, clients, perClient int) {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		c := dialClient(t, addr)
		wg.Go(func() {
			for range perClient {
				if err := c.tryCall("update"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFrontSerializesWrites(t *testing.T) {
	t.Run("without the front writes overlap", func(t *testing.T) {
		u := newFakeUpstream(t)
		defer u.close()
		concurrentWrites(t, u.addr(), 8, 10)
		assert.Greater(t, u.maxWrites.Load(), int32(1), "the fake cannot show overlapping writes")
	})
	t.Run("through the front they do not", func(t *testing.T) {
		u := newFakeUpstream(t)
		f := startTestFront(t, u)
		concurrentWrites(t, f.addr().String(), 8, 10)
		assert.Equal(t, int32(1), u.maxWrites.Load())
		assert.Equal(t, int32(80), u.received.Load())
	})
}

func TestFrontReadsPassWrites(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	addr := f.addr().String()

	writer := dialClient(t, addr)
	holdID := writer.send("hold", 0)
	waitFor(t, "the held write to reach the server", hasEvent(u, "start hold"))

	// A read goes through while the write is inside the server.
	dialClient(t, addr).call("find")

	// Another write waits for the held one to finish.
	second := dialClient(t, addr)
	updateID := second.send("update", 0)
	time.Sleep(50 * time.Millisecond) // time for a wrongly forwarded write to arrive
	u.unhold()

	h, err := writer.recv()
	require.NoError(t, err)
	assert.Equal(t, holdID, h.responseTo)
	h, err = second.recv()
	require.NoError(t, err)
	assert.Equal(t, updateID, h.responseTo)
	assert.Equal(t, []string{"start hold", "start find", "end find", "end hold", "start update", "end update"}, u.eventLog())
}

// A write to another database does not wait for one inside FerretDB: each database has a
// write slot of its own. A write to the held one's database still waits.
func TestFrontWritesOfOtherDatabasesPass(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	addr := f.addr().String()

	writer := dialClient(t, addr)
	holdID := writer.sendTo("data", "hold", 0)
	waitFor(t, "the held write to reach the server", hasEvent(u, "start hold"))

	same := dialClient(t, addr)
	sameID := same.sendTo("data", "update", 0) // waits for the slot of "data"
	other := dialClient(t, addr)
	otherID := other.sendTo("leases", "insert", 0)
	h, err := other.recv()
	require.NoError(t, err, "the write to another database is answered while the held one runs")
	assert.Equal(t, otherID, h.responseTo)
	time.Sleep(50 * time.Millisecond) // time for a wrongly forwarded write to arrive
	assert.Equal(t, []string{"start hold", "start insert", "end insert"}, u.eventLog())

	u.unhold()
	h, err = writer.recv()
	require.NoError(t, err)
	assert.Equal(t, holdID, h.responseTo)
	h, err = same.recv()
	require.NoError(t, err)
	assert.Equal(t, sameID, h.responseTo)
	assert.Equal(t, []string{"start hold", "start insert", "end insert", "end hold", "start update", "end update"}, u.eventLog())
}

// reset ends the client's connection with a TCP reset, as a client that crashes or a
// middlebox that gives up does.
func (w *wireClient) reset() {
	w.t.Helper()
	require.NoError(w.t, w.c.(*net.TCPConn).SetLinger(0))
	require.NoError(w.t, w.c.Close())
}

// drainingLinks counts f's links that are waiting for FerretDB to finish a write whose
// client went away.
func drainingLinks(f *front) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for l := range f.links {
		l.mu.Lock()
		if l.draining {
			n++
		}
		l.mu.Unlock()
	}
	return n
}

func linkCount(f *front) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.links)
}

// holdAndLeave sends cmd with flags on a new connection, waits until the server runs it,
// queues an update from another client behind it, and then makes the first client leave.
// It returns the second client and its update's request id once the front has seen the
// first client go.
func holdAndLeave(t *testing.T, f *front, u *fakeUpstream, cmd string, flags wiremessage.MsgFlag, leave func(*wireClient)) (*wireClient, int32) {
	t.Helper()
	addr := f.addr().String()
	holder := dialClient(t, addr)
	holder.send(cmd, flags)
	waitFor(t, "the held write to reach the server", hasEvent(u, "start "+cmd))
	waiter := dialClient(t, addr)
	updateID := waiter.send("update", 0) // waits for the slot
	leave(holder)
	waitFor(t, "the front to see the client go", func() bool { return drainingLinks(f) == 1 })
	return waiter, updateID
}

// A client that goes away while its write is inside FerretDB does not free the slot:
// FerretDB runs the write to its end, so the next write waits for FerretDB's reply, which
// the front reads and drops.
func TestFrontKeepsSlotUntilServerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags wiremessage.MsgFlag
		leave func(*wireClient)
	}{
		{"client closes", 0, func(c *wireClient) { require.NoError(t, c.c.Close()) }},
		{"client resets", 0, (*wireClient).reset},
		{"unacknowledged write, client resets", wiremessage.MoreToCome, (*wireClient).reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newFakeUpstream(t)
			f := startTestFront(t, u)
			waiter, updateID := holdAndLeave(t, f, u, "hold", tc.flags, tc.leave)

			time.Sleep(50 * time.Millisecond) // time for a wrongly freed slot to let the update in
			assert.Equal(t, []string{"start hold"}, u.eventLog(), "a write entered the server beside the held one")
			assert.Len(t, f.slotOf("test"), 1, "the slot is held")

			u.unhold()
			h, err := waiter.recv()
			require.NoError(t, err)
			assert.Equal(t, updateID, h.responseTo)
			assert.Equal(t, []string{"start hold", "end hold", "start update", "end update"}, u.eventLog())
			waitFor(t, "the drained link to end", func() bool { return linkCount(f) == 1 })
			assert.Zero(t, drainingLinks(f))
		})
	}
}

// When FerretDB closes the connection of a draining link, it runs nothing sent on it any
// more, and the slot is free.
func TestFrontDrainEndsWhenServerCloses(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	waiter, updateID := holdAndLeave(t, f, u, "holdclose", 0, (*wireClient).reset)

	u.unhold()
	h, err := waiter.recv()
	require.NoError(t, err)
	assert.Equal(t, updateID, h.responseTo)
	assert.Equal(t, []string{"start holdclose", "end holdclose", "start update", "end update"}, u.eventLog())
}

// A drain that outlasts the front's drainTimeout gives the slot back although FerretDB has
// not answered. The drain is seen in the front's log, not by polling drainingLinks: the
// link stops draining after 100ms, and a slow machine's poll could miss it.
func TestFrontDrainTimeout(t *testing.T) {
	u := newFakeUpstream(t)
	var logged logtest.Buffer
	f := startTestFrontDrain(t, u, 100*time.Millisecond, slog.New(slog.NewTextHandler(&logged, nil)))
	addr := f.addr().String()
	holder := dialClient(t, addr)
	holder.send("hold", 0)
	waitFor(t, "the held write to reach the server", hasEvent(u, "start hold"))
	waiter := dialClient(t, addr)
	updateID := waiter.send("update", 0) // waits for the slot
	holder.reset()

	h, err := waiter.recv()
	require.NoError(t, err)
	assert.Equal(t, updateID, h.responseTo)
	assert.Equal(t, []string{"start hold", "start update", "end update"}, u.eventLog())
	assert.Contains(t, logged.String(), "giving the write slot back although FerretDB has not finished a write whose client went away")
}

// close ends a draining link without waiting for FerretDB.
func TestFrontCloseEndsDrain(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	u := newFakeUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := startFront(ln, u.addr(), defaultDrainTimeout, nil, slog.New(slog.DiscardHandler))
	waiter, _ := holdAndLeave(t, f, u, "hold", 0, (*wireClient).reset)

	require.NoError(t, f.close())
	_, err = waiter.recv()
	assert.True(t, errors.Is(err, io.EOF) || isConnError(err), "got %v", err)
	waiter.c.Close()
	u.close()
}

// A reply the front cannot pair with a request ends the client's connection; the slot is
// held until FerretDB has closed the connection, and so runs nothing more sent on it.
func TestFrontBadReplyKeepsSlotUntilServerCloses(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	addr := f.addr().String()

	c := dialClient(t, addr)
	c.send("badreply", 0)
	_, err := c.recv()
	assert.ErrorIs(t, err, io.EOF, "the front drops the client")

	dialClient(t, addr).call("update")
	assert.Equal(t, []string{"start badreply", "end badreply", "eof", "start update", "end update"}, u.eventLog())
}

func TestFrontFreesSlotWhenServerDrops(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	addr := f.addr().String()

	dying := dialClient(t, addr)
	dying.send("die", 0)
	_, err := dying.recv()
	assert.ErrorIs(t, err, io.EOF, "the front closes the client's connection when the server closes its own")

	dialClient(t, addr).call("update")
}

func TestFrontDropsAnswerToMoreToCome(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	c := dialClient(t, f.addr().String())

	c.send("insert", wiremessage.MoreToCome)
	c.send("insert", wiremessage.MoreToCome)
	c.call("find") // the first reply the client reads answers find, not the inserts
	c.call("update")
	assert.Equal(t, int32(4), u.received.Load())
	assert.Equal(t, int32(1), u.maxWrites.Load())
}

func TestFrontForwardsReplyStream(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	c := dialClient(t, f.addr().String())

	id := c.send("hello", wiremessage.ExhaustAllowed)
	for i := range 3 {
		require.NoError(t, c.c.SetReadDeadline(time.Now().Add(ioTimeout)))
		msg, err := readMessage(c.r, nil)
		require.NoError(t, err)
		h, err := parseHeader(msg)
		require.NoError(t, err)
		if i == 0 {
			assert.Equal(t, id, h.responseTo)
		}
		assert.Equal(t, i < 2, moreToCome(msg), "reply %d", i)
	}
	c.call("update") // the link pairs replies with requests after the stream ended
}

func TestFrontDropsUnsupportedOpcode(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	c := dialClient(t, f.addr().String())

	msg := command(1, 0, doc("insert"))
	msg[12] = byte(wiremessage.OpCompressed & 0xff)
	msg[13] = byte(wiremessage.OpCompressed >> 8)
	_, err := c.c.Write(msg)
	require.NoError(t, err)
	_, err = c.recv()
	assert.ErrorIs(t, err, io.EOF)
	assert.Zero(t, u.received.Load(), "nothing reaches the server")

	dialClient(t, f.addr().String()).call("update")
}

func TestFrontCloseEndsLinks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	u := newFakeUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := startFront(ln, u.addr(), defaultDrainTimeout, nil, slog.New(slog.DiscardHandler))
	addr := f.addr().String()

	holder := dialClient(t, addr)
	holder.send("hold", 0)
	waitFor(t, "the held write to reach the server", hasEvent(u, "start hold"))
	waiter := dialClient(t, addr)
	waiter.send("update", 0) // waits for the slot
	idle := dialClient(t, addr)
	idle.call("ping")

	require.NoError(t, f.close())
	for _, c := range []*wireClient{holder, waiter, idle} {
		_, err := c.recv()
		assert.True(t, errors.Is(err, io.EOF) || isConnError(err), "got %v", err)
		c.c.Close()
	}
	_, err = net.Dial("tcp", addr)
	assert.Error(t, err, "the listener is closed")
	u.close()
	assert.NoError(t, f.close(), "close is idempotent")
}

// isConnError reports whether err comes from the connection (a reset, for one).
func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// Once the front is closing, a link is handed no slot: close ends the links one after the
// other, and a write of a link it has not reached yet must not start when an earlier one
// gives the slot back.
func TestFrontClosingHandsNoSlot(t *testing.T) {
	u := newFakeUpstream(t)
	f := startTestFront(t, u)
	req := request{database: "test", write: true}
	require.True(t, f.acquire(&req, make(chan struct{})))
	release(req.slot)
	f.cancel() // what close does first
	req = request{database: "test", write: true}
	assert.False(t, f.acquire(&req, make(chan struct{})))
	assert.Nil(t, req.slot)
	assert.Empty(t, f.slotOf("test"), "the slot is free")
}
