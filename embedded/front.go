package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The front is a MongoDB wire-protocol proxy between the clients and FerretDB. FerretDB
// 1.24.2 applies an update by reading the matching documents, changing them in memory and
// writing them back, with nothing holding the documents in between: two concurrent updates
// of one document can both match it, and one of them is lost. The front restores MongoDB's
// single-document atomicity by letting at most one write command per database be inside
// FerretDB at a time.
//
// Writes to different databases run side by side. FerretDB keeps each database in a SQLite
// file of its own, and a command changes documents of the database it names ($db) only
// (FerretDB refuses a renameCollection across databases), so two writes to different
// databases never touch one document. A write waits for writes to its own database only:
// a database that holds leases is not held up by another's stream of data writes.
//
// What always holds:
//
//   - Each database's write slot is held by at most one request in the whole front. A
//     request that is not known to be a read (see classify) takes the slot of the database
//     it names before its first byte is forwarded to FerretDB, and keeps it until FerretDB is known to have finished with it: FerretDB's
//     final reply to it has been read, or FerretDB has closed the connection the request
//     went on. Nothing the client does shortens that: a client that resets, closes or
//     times out while its write is inside FerretDB does not free the slot, because FerretDB
//     does not cancel a command whose client went away; it finishes it. So no two writes
//     to one database ever overlap inside FerretDB. There are two exceptions: close, after which no write
//     enters through this front, and a write FerretDB has still not finished drainTimeout
//     after its client went away (see below). Reads never wait for the slot.
//   - Messages are forwarded whole, unchanged and in order in both directions, with two
//     exceptions. FerretDB answers a request sent with moreToCome, which MongoDB never
//     answers, and the front discards that answer so that the client reads the stream
//     MongoDB would send. Such a write keeps the slot until FerretDB's answer shows it is
//     done, so unacknowledged writes are serialized too, whether or not their client is
//     still there. And a write the front's check answers (below) is not forwarded: a ping
//     with its request id and flags goes in its place, and the client gets the check's
//     reply instead of the ping's. The ping keeps the link's pairing of replies with
//     requests, and the slot, exactly as for any write.
//   - No write through the front makes a document larger than MongoDB's 16 MiB limit. The
//     check (sizeGuard) is asked about every insert, update and findAndModify after the
//     request has taken its slot and before any byte of it is forwarded, and the slot is
//     held from the check until FerretDB has finished the write (or the ping), so no other
//     write to the database runs between them: the documents the check measured are the
//     ones the write changes. The check lets the request through as sent, or refuses the
//     statements that would pass the limit, as MongoDB refuses them, and runs the others
//     itself, one at a time, on connections of its own to FerretDB; all of that happens
//     inside the request's slot, before the ping is forwarded. A check that fails (FerretDB
//     unreachable, or close) ends the link as a broken client side does: the client sees
//     its connection drop, as it would when MongoDB's connection drops, and learns nothing
//     of what ran. The check is asked about every other write too, and learns the outcome
//     of each write it let through (verdict.settle) before the slot is given back: from
//     FerretDB's final reply, or, when the slot is given back without one (FerretDB closed
//     the connection, the drain timed out, close), as unknown. So the document sizes the
//     check keeps (sizeBounds) change only inside their database's slot.
//   - When the client side of a link ends (the client closes or resets its connection, sends
//     a message the front cannot classify, or cannot be written to) or a request cannot be
//     forwarded, the link stops reading and writing the client and forwards nothing more
//     to FerretDB. If none of its requests holds the slot, it closes FerretDB's connection
//     and ends. Otherwise it drains: it half-closes FerretDB's connection (no more
//     requests) and reads FerretDB's replies, discarding them, until the one to the write
//     holding the slot has come, and only then ends, gives the slot back and closes.
//   - When FerretDB closes a link's connection, the link ends and gives the slot back if
//     one of its requests holds it. That is safe: FerretDB serves a connection on one
//     goroutine that reads a request, runs it to the end and writes the reply, and it
//     closes the connection only once that goroutine has returned, so when the close is
//     seen no request sent on the connection is running. A request the front had written
//     only in part (the write failed) is never run: FerretDB reads a message whole before
//     it runs it, and drops the connection on a truncated one.
//   - A reply from FerretDB that the front cannot frame or pair with a request ends the
//     client side as above, and the link then discards everything FerretDB sends until
//     FerretDB closes the connection, which it does after finishing the request it is
//     running (the half-close tells it no more are coming); the slot is kept until then.
//   - close ends every link at once, draining or not, and does not wait for FerretDB: a
//     write still inside FerretDB then runs on alone, and no write can follow it through
//     this front.
//
// A drain is bounded by the front's drainTimeout (defaultDrainTimeout, five minutes), far
// longer than any write this project makes should take on FerretDB, and by nothing
// shorter: a big write can be slow, and a bound that cut it short would break the
// guarantee exactly then. The bound is there for a write FerretDB never answers (a bulk
// write of 100 updates or more: FerretDB then answers nothing more on that collection,
// while other databases still work), which would otherwise keep the slot, and so every
// write to its database, until close. When it passes, the link logs a warning, closes
// FerretDB's connection and gives the slot back; this is the one case in which the next
// write may enter while a write is still inside FerretDB. A drain that lasts more than
// drainWarnAfter is logged.
//
// Each client connection gets its own FerretDB connection and two goroutines: up reads
// requests and forwards them, down reads replies and forwards them, pairing each reply
// with the oldest request still waiting for one (FerretDB answers a connection's requests
// one by one, in order). A reply carrying moreToCome (an exhaust cursor or a streaming
// hello; FerretDB sends none) is followed by more replies to the same request.
//
// Two designs were rejected. One goroutine per connection that holds a mutex from
// forwarding a request until forwarding its reply stops reading the client while it
// waits: it cannot follow a client that sends several requests without waiting for
// replies (moreToCome writes), and it sees a client that went away only when FerretDB has
// answered. The design before this one ended the whole link, and gave the slot back, as
// soon as the client went away; FerretDB went on running the write, the next write ran
// beside it, and under connection resets acknowledged increments were lost and two
// compare-and-set commits were both acknowledged.
type front struct {
	ln       net.Listener
	upstream string // FerretDB's address
	log      *slog.Logger

	ctx    context.Context // canceled by close
	cancel context.CancelFunc

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
	// slots holds each database's write slot, made when a write first names the database:
	// a request holds a slot while it has put the channel's one element in, and gives it
	// back by taking it out.
	slots map[string]chan struct{}

	// drainTimeout bounds how long a link whose client went away waits for FerretDB to
	// finish its write before it gives the slot back regardless.
	drainTimeout time.Duration

	// check is asked about every write while its request holds the slot; nil lets every
	// write through as sent.
	check writeCheck

	// wg counts serve and every link's goroutines.
	wg sync.WaitGroup
}

const (
	// dialTimeout bounds connecting to FerretDB for a new client connection.
	dialTimeout = 10 * time.Second

	// readBufferSize is the buffered reader's size on each side of a link.
	readBufferSize = 32 << 10

	// keepBufferCap is the largest message buffer a link keeps for the next message;
	// a larger one is left to the garbage collector.
	keepBufferCap = 1 << 20

	// defaultDrainTimeout is the front's drainTimeout: how long a link whose client went
	// away waits for FerretDB to finish the link's write before it gives the write slot
	// back regardless. It is long because FerretDB can take long on a big write.
	defaultDrainTimeout = 5 * time.Minute

	// drainWarnAfter is how long a link drains (waits for FerretDB to finish a write
	// whose client went away) before the front logs a warning. It does not end the drain.
	drainWarnAfter = 10 * time.Second
)

// writeCheck decides, while the front holds the write slot of a request's database, whether
// FerretDB may run the request as sent.
type writeCheck interface {
	// answer returns a verdict without reply when msg, the whole message of req, may be
	// forwarded as sent. Otherwise it has done what of the request may be done, through
	// connections of its own, and the verdict's reply is the reply the client gets instead
	// of FerretDB's. An error means it could not tell, and may have done part of the
	// request: the link then ends.
	answer(ctx context.Context, req request, msg []byte) (verdict, error)
}

// verdict is a writeCheck's answer about one write.
type verdict struct {
	// reply, when not nil, is the reply the client gets instead of FerretDB's; the
	// request itself is not forwarded.
	reply bsoncore.Document
	// settle, when not nil, is called once for a forwarded request, while it still holds
	// its slot: with the command document of FerretDB's final reply to it, or with nil
	// when the slot is given back without one (the outcome is unknown).
	settle func(reply bsoncore.Document)
}

// startFront starts serving ln, forwarding every connection to upstream. drainTimeout is
// the front's drainTimeout (defaultDrainTimeout outside tests); check, when not nil, is
// asked about every write before it is forwarded.
func startFront(ln net.Listener, upstream string, drainTimeout time.Duration, check writeCheck, log *slog.Logger) *front {
	ctx, cancel := context.WithCancel(context.Background())
	f := &front{
		ln:           ln,
		upstream:     upstream,
		log:          log,
		slots:        make(map[string]chan struct{}),
		ctx:          ctx,
		cancel:       cancel,
		links:        make(map[*link]struct{}),
		drainTimeout: drainTimeout,
		check:        check,
	}
	f.wg.Add(1)
	go f.serve()
	return f
}

// addr returns the address clients connect to.
func (f *front) addr() net.Addr { return f.ln.Addr() }

// close stops accepting, ends every link and waits for all the front's goroutines.
func (f *front) close() error {
	f.cancel()
	err := f.ln.Close()
	f.mu.Lock()
	f.closed = true
	links := make([]*link, 0, len(f.links))
	for l := range f.links {
		links = append(links, l)
	}
	f.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// serve accepts client connections until close.
func (f *front) serve() {
	defer f.wg.Done()
	var delay time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if f.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or the like: back off and try again.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			f.log.Warn("front: accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-f.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		// serve's own count keeps wg above zero, so adding here never races close's Wait.
		f.wg.Add(1)
		go newLink(f, c).run()
	}
}

// register adds l to the links that close ends. It reports false once close has begun.
func (f *front) register(l *link) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.links[l] = struct{}{}
	return true
}

func (f *front) unregister(l *link) {
	f.mu.Lock()
	delete(f.links, l)
	f.mu.Unlock()
}

// slotOf returns the write slot of database.
func (f *front) slotOf(database string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	slot, ok := f.slots[database]
	if !ok {
		slot = make(chan struct{}, 1)
		f.slots[database] = slot
	}
	return slot
}

// acquire takes the write slot of req's database and records it in req, or gives up and
// reports false when the link's client side ends first or the front is closing. close ends
// the links one after the other, so a link it has not reached yet may be handed the slot by
// one it has closed: such a write is not forwarded.
func (f *front) acquire(req *request, clientDone <-chan struct{}) bool {
	slot := f.slotOf(req.database)
	select {
	case slot <- struct{}{}:
		if f.ctx.Err() != nil {
			release(slot)
			return false
		}
		req.slot = slot
		return true
	case <-clientDone:
		return false
	case <-f.ctx.Done():
		return false
	}
}

// release gives a write slot back.
func release(slot chan struct{}) { <-slot }

// link is one client connection and the FerretDB connection that serves it.
type link struct {
	f      *front
	client net.Conn
	server net.Conn // set by run before the link is registered

	// clientDone is closed when the client side ends: the client connection is closed,
	// and nothing more is read from it, written to it or forwarded to FerretDB.
	clientDone chan struct{}
	clientOnce sync.Once

	closing   chan struct{} // closed when the link is closed for good: both connections
	closeOnce sync.Once

	mu sync.Mutex
	// awaiting holds the forwarded requests whose final reply has not been read yet,
	// oldest first. An entry with write set holds its database's write slot. A request is added
	// before its first byte is written to FerretDB, so one that was written only in part
	// stays here until FerretDB closes the connection.
	awaiting []request
	// streaming is set while the oldest request has had replies carrying moreToCome.
	streaming bool
	// draining is set once up has stopped while a request held the slot: down discards
	// replies and stops once no awaiting request holds the slot.
	draining bool
}

func newLink(f *front, client net.Conn) *link {
	return &link{f: f, client: client, clientDone: make(chan struct{}), closing: make(chan struct{})}
}

// run serves the link until its client side ends and FerretDB is done with its write, or
// FerretDB closes the connection, or the front closes; then it cleans up.
func (l *link) run() {
	defer l.f.wg.Done()
	defer l.client.Close()

	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(l.f.ctx, "tcp", l.f.upstream)
	if err != nil {
		if l.f.ctx.Err() == nil {
			l.f.log.Warn("front: cannot reach FerretDB", "err", err)
		}
		return
	}
	l.server = server
	if !l.f.register(l) {
		server.Close()
		return
	}
	defer l.f.unregister(l)
	l.f.log.Debug("front: link opened", "client", l.client.RemoteAddr())

	downDone := make(chan struct{})
	go func() {
		defer close(downDone)
		l.down()
	}()
	l.up()
	// Nothing more goes to FerretDB, and nothing more to the client.
	l.endClient()
	if l.drain() {
		l.waitDrained(downDone)
	} else {
		<-downDone
	}
	l.close()

	// Both directions have stopped, and FerretDB has answered every write that held the
	// slot, or closed the connection (so runs none of them), or the front is closing, or
	// the drain timed out.
	for _, req := range l.awaiting {
		if req.slot != nil {
			if req.settle != nil {
				req.settle(nil)
			}
			release(req.slot)
		}
	}
	l.awaiting = nil
	l.f.log.Debug("front: link closed", "client", l.client.RemoteAddr())
}

// drain is called once up has stopped. When none of the link's requests holds the slot it
// closes FerretDB's connection, which stops down, and reports false. Otherwise it sets
// draining and half-closes the connection, and reports true: down reads on until the
// write's final reply (or FerretDB's close, which the half-close brings about once FerretDB
// has run what it read).
func (l *link) drain() bool {
	l.mu.Lock()
	holding := l.holdsSlot()
	l.draining = holding
	l.mu.Unlock()
	if !holding {
		l.server.Close()
		return false
	}
	// The dialer makes a *net.TCPConn; when the connection is already broken, the error
	// only repeats what down sees.
	if cw, ok := l.server.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	return true
}

// waitDrained waits for down to end while the link drains, for at most the front's
// drainTimeout; then it closes the link, which ends down.
func (l *link) waitDrained(downDone <-chan struct{}) {
	l.f.log.Debug("front: client gone while its write is in FerretDB; waiting for FerretDB to finish it",
		"client", l.client.RemoteAddr())
	warn := time.NewTimer(drainWarnAfter)
	defer warn.Stop()
	giveUp := time.NewTimer(l.f.drainTimeout)
	defer giveUp.Stop()
	for {
		select {
		case <-downDone:
			return
		case <-warn.C:
			l.f.log.Warn("front: a write whose client went away is still running in FerretDB; the write slot stays held until it ends",
				"client", l.client.RemoteAddr(), "waited", drainWarnAfter, "give_up_after", l.f.drainTimeout)
		case <-giveUp.C:
			l.f.log.Warn("front: giving the write slot back although FerretDB has not finished a write whose client went away; the next write may overlap it",
				"client", l.client.RemoteAddr(), "waited", l.f.drainTimeout)
			l.close()
			<-downDone
			return
		}
	}
}

// holdsSlot reports whether one of the awaiting requests holds a write slot. l.mu must
// be held.
func (l *link) holdsSlot() bool {
	for _, req := range l.awaiting {
		if req.slot != nil {
			return true
		}
	}
	return false
}

// endClient ends the client side: it closes the client connection, which stops up, and
// tells down to forward nothing more.
func (l *link) endClient() {
	l.clientOnce.Do(func() {
		close(l.clientDone)
		l.client.Close()
	})
}

// close ends the link: both connections are closed, which stops up and down.
func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.endClient()
		l.server.Close()
	})
}

// up forwards requests from the client to FerretDB, taking the write slot for writes. It
// returns when the client side ends or a request cannot be forwarded.
func (l *link) up() {
	r := bufio.NewReaderSize(l.client, readBufferSize)
	var buf []byte
	for {
		msg, err := readMessage(r, buf)
		if err != nil {
			l.logEnd("client", err)
			return
		}
		req, err := classify(msg)
		if err != nil {
			l.f.log.Warn("front: dropping client connection", "err", err)
			return
		}
		l.f.log.Debug("front: request", "op", req.opCode, "command", req.command, "database", req.database, "write", req.write,
			"more_to_come", req.moreToCome, "request_id", req.requestID)
		if req.write && !l.f.acquire(&req, l.clientDone) {
			return
		}
		out, err := l.answered(&req, msg)
		if err != nil {
			release(req.slot)
			l.f.log.Warn("front: dropping client connection: cannot check a write's document sizes", "err", err)
			return
		}
		l.mu.Lock()
		l.awaiting = append(l.awaiting, req)
		l.mu.Unlock()
		if _, err := l.server.Write(out); err != nil {
			l.logEnd("FerretDB", err)
			return
		}
		buf = reusable(msg)
	}
}

// answered asks the front's check about req, a request holding its slot, and returns the
// message to forward to FerretDB for it: msg itself, or, when the check answered req, a ping
// with req's request id and flags, whose reply down replaces with req.answer.
func (l *link) answered(req *request, msg []byte) ([]byte, error) {
	if l.f.check == nil || !req.write {
		return msg, nil
	}
	v, err := l.f.check.answer(l.f.ctx, *req, msg)
	if err != nil {
		return msg, err
	}
	if v.reply == nil {
		req.settle = v.settle
		return msg, nil
	}
	l.f.log.Debug("front: request answered by the front", "command", req.command, "database", req.database,
		"request_id", req.requestID, "reply", v.reply)
	req.answer = replyMessage(req.requestID, v.reply)
	return pingMessage(req.requestID, req.database, req.moreToCome), nil
}

// down forwards replies from FerretDB to the client, giving the write slot back when a
// write's final reply arrives. Once the client side has ended it discards the replies, and
// once the link drains it stops after the reply that frees the slot. It returns when
// FerretDB's connection ends.
func (l *link) down() {
	r := bufio.NewReaderSize(l.server, readBufferSize)
	var buf []byte
	for {
		msg, err := readMessage(r, buf)
		if errors.Is(err, errMalformed) {
			l.discard(r, err)
			return
		}
		if err != nil {
			// FerretDB closed the connection, or the link did.
			l.logEnd("FerretDB", err)
			l.endClient()
			return
		}
		req, drained, err := l.pair(msg)
		if err != nil {
			l.discard(r, err)
			return
		}
		if drained {
			return
		}
		buf = reusable(msg)
		if req.moreToCome {
			// The client sent it with moreToCome and reads no reply.
			continue
		}
		select {
		case <-l.clientDone:
			continue
		default:
		}
		if req.answer != nil {
			msg = req.answer
		}
		if _, err := l.client.Write(msg); err != nil {
			l.logEnd("client", err)
			l.endClient()
		}
	}
}

// discard handles a reply the front cannot frame or pair (err says why). The stream can
// no longer be followed, so the client side ends and everything FerretDB sends is read and
// dropped until FerretDB closes the connection: it does so once it has run the request it
// is on, as run half-closes the connection when a request holds the slot (and closes it
// when none does).
func (l *link) discard(r io.Reader, err error) {
	l.f.log.Warn("front: dropping client connection: unreadable reply from FerretDB", "err", err)
	l.endClient()
	_, _ = io.Copy(io.Discard, r)
}

// pair finds the request that reply answers. When the reply is the request's last (it has
// no moreToCome flag), the request stops waiting and gives back the write slot if it
// holds it; drained then reports whether the link is draining and no longer holds the
// slot, so that down can stop.
func (l *link) pair(reply []byte) (req request, drained bool, err error) {
	h, err := parseHeader(reply)
	if err != nil {
		return request{}, false, err
	}
	final := !moreToCome(reply)

	l.mu.Lock()
	if len(l.awaiting) == 0 {
		l.mu.Unlock()
		return request{}, false, fmt.Errorf("%w: reply %d to no request", errMalformed, h.responseTo)
	}
	req = l.awaiting[0]
	if !l.streaming && h.responseTo != req.requestID {
		l.mu.Unlock()
		return request{}, false, fmt.Errorf("%w: reply to request %d while request %d waits", errMalformed, h.responseTo, req.requestID)
	}
	l.streaming = !final
	if final {
		l.awaiting[0] = request{}
		l.awaiting = l.awaiting[1:]
	}
	drained = l.draining && !l.holdsSlot()
	l.mu.Unlock()

	if final && req.slot != nil {
		if req.settle != nil {
			req.settle(replyDocument(reply))
		}
		release(req.slot)
	}
	if !final {
		l.f.log.Debug("front: reply with moreToCome", "response_to", h.responseTo, "command", req.command)
	}
	return req, drained, nil
}

// logEnd logs why one side of a link stopped, unless it is the ordinary end of a link.
func (l *link) logEnd(side string, err error) {
	select {
	case <-l.closing:
		return
	default:
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	l.f.log.Warn("front: link broken", "side", side, "err", err)
}

// reusable returns msg's buffer for the next message, unless it is too large to keep.
func reusable(msg []byte) []byte {
	if cap(msg) > keepBufferCap {
		return nil
	}
	return msg[:0]
}
