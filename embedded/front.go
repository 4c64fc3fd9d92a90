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
)

// The front is a MongoDB wire-protocol proxy between the clients and FerretDB. FerretDB
// 1.24.2 applies an update by reading the matching documents, changing them in memory and
// writing them back, with nothing holding the documents in between: two concurrent updates
// of one document can both match it, and one of them is lost. The front restores MongoDB's
// single-document atomicity by letting at most one write command be inside FerretDB at a
// time.
//
// What always holds:
//
//   - The write slot is held by at most one request in the whole front. A request that is
//     not known to be a read (see classify) takes it before its first byte is forwarded to
//     FerretDB, and gives it back once FerretDB's final reply to it has been read, or once
//     its link has ended. So no two writes ever overlap inside FerretDB. Reads never wait
//     for the slot.
//   - Messages are forwarded whole, unchanged and in order in both directions; the front
//     never makes one up. One kind is dropped: FerretDB answers a request sent with
//     moreToCome, which MongoDB never answers, and the front discards that answer so that
//     the client reads the stream MongoDB would send. Such a write keeps the slot until
//     FerretDB's answer shows it is done, so unacknowledged writes are serialized too.
//   - A link that ends for any reason (either side closes, a malformed message, Close)
//     closes both of its connections and gives back the slot if one of its requests holds
//     it.
//
// Each client connection gets its own FerretDB connection and two goroutines: up reads
// requests and forwards them, down reads replies and forwards them, pairing each reply
// with the oldest request still waiting for one (FerretDB answers a connection's requests
// one by one, in order). A reply carrying moreToCome (an exhaust cursor or a streaming
// hello; FerretDB sends none) is followed by more replies to the same request.
//
// The simpler design, one goroutine per connection that holds a mutex from forwarding a
// request until forwarding its reply, was rejected: it stops reading the client while it
// waits, so a write whose reply never comes would keep the mutex after its client gave up
// and closed the connection, and every writer after it would wait for ever. Here up keeps
// reading, sees the client go, and the link ends and frees the slot.
type front struct {
	ln       net.Listener
	upstream string // FerretDB's address
	log      *slog.Logger

	// slot is the write slot: a request holds it while it has put the channel's one
	// element in, and gives it back by taking it out.
	slot chan struct{}

	ctx    context.Context // canceled by close
	cancel context.CancelFunc

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool

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
)

// startFront starts serving ln, forwarding every connection to upstream.
func startFront(ln net.Listener, upstream string, log *slog.Logger) *front {
	ctx, cancel := context.WithCancel(context.Background())
	f := &front{
		ln:       ln,
		upstream: upstream,
		log:      log,
		slot:     make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		links:    make(map[*link]struct{}),
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
		go (&link{f: f, client: c, closing: make(chan struct{})}).run()
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

// acquire takes the write slot, or gives up and reports false when the link ends first.
func (f *front) acquire(closing <-chan struct{}) bool {
	select {
	case f.slot <- struct{}{}:
		return true
	case <-closing:
		return false
	}
}

// release gives the write slot back.
func (f *front) release() { <-f.slot }

// link is one client connection and the FerretDB connection that serves it.
type link struct {
	f      *front
	client net.Conn
	server net.Conn // set by run before the link is registered

	closing   chan struct{} // closed when the link ends
	closeOnce sync.Once

	mu sync.Mutex
	// awaiting holds the forwarded requests whose final reply has not been read yet,
	// oldest first. An entry with write set holds the write slot.
	awaiting []request
	// streaming is set while the oldest request has had replies carrying moreToCome.
	streaming bool
}

// run serves the link until either side closes, then cleans up.
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
	l.close()
	<-downDone

	// Both directions have stopped: a request still waiting for its reply no longer
	// needs the slot.
	for _, req := range l.awaiting {
		if req.write {
			l.f.release()
		}
	}
	l.awaiting = nil
	l.f.log.Debug("front: link closed", "client", l.client.RemoteAddr())
}

// close ends the link: both connections are closed, which stops up and down.
func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.client.Close()
		l.server.Close()
	})
}

// up forwards requests from the client to FerretDB, taking the write slot for writes.
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
		l.f.log.Debug("front: request", "op", req.opCode, "command", req.command, "write", req.write,
			"more_to_come", req.moreToCome, "request_id", req.requestID)
		if req.write && !l.f.acquire(l.closing) {
			return
		}
		l.mu.Lock()
		l.awaiting = append(l.awaiting, req)
		l.mu.Unlock()
		if _, err := l.server.Write(msg); err != nil {
			l.logEnd("FerretDB", err)
			return
		}
		buf = reusable(msg)
	}
}

// down forwards replies from FerretDB to the client, giving the write slot back when a
// write's final reply arrives.
func (l *link) down() {
	defer l.close()
	r := bufio.NewReaderSize(l.server, readBufferSize)
	var buf []byte
	for {
		msg, err := readMessage(r, buf)
		if err != nil {
			l.logEnd("FerretDB", err)
			return
		}
		req, err := l.pair(msg)
		if err != nil {
			l.f.log.Warn("front: dropping FerretDB connection", "err", err)
			return
		}
		if req.moreToCome {
			// The client sent it with moreToCome and reads no reply.
			continue
		}
		if _, err := l.client.Write(msg); err != nil {
			l.logEnd("client", err)
			return
		}
		buf = reusable(msg)
	}
}

// pair finds the request that reply answers. When the reply is the request's last (it has
// no moreToCome flag), the request stops waiting and gives back the write slot if it
// holds it.
func (l *link) pair(reply []byte) (request, error) {
	h, err := parseHeader(reply)
	if err != nil {
		return request{}, err
	}
	final := !moreToCome(reply)

	l.mu.Lock()
	if len(l.awaiting) == 0 {
		l.mu.Unlock()
		return request{}, fmt.Errorf("%w: reply %d to no request", errMalformed, h.responseTo)
	}
	req := l.awaiting[0]
	if !l.streaming && h.responseTo != req.requestID {
		l.mu.Unlock()
		return request{}, fmt.Errorf("%w: reply to request %d while request %d waits", errMalformed, h.responseTo, req.requestID)
	}
	l.streaming = !final
	if final {
		l.awaiting[0] = request{}
		l.awaiting = l.awaiting[1:]
	}
	l.mu.Unlock()

	if final && req.write {
		l.f.release()
	}
	if !final {
		l.f.log.Debug("front: reply with moreToCome", "response_to", h.responseTo, "command", req.command)
	}
	return req, nil
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
