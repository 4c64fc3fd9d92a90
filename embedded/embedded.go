// Package embedded runs a MongoDB-compatible server inside the process, for tests,
// benchmarks and local development where no MongoDB can be installed: FerretDB 1.24.2 on
// SQLite, listening on 127.0.0.1, behind a front that makes its writes behave as MongoDB's.
//
// FerretDB alone does not make a single-document write atomic: two concurrent updates of
// one document can both match it, and one of them is lost. When 20 callers race one
// compare-and-set update, several of them are told they matched in most rounds while the
// document keeps the change of only one; 16 writers of 25 $inc each have left 25 of 400.
// The front is a wire-protocol proxy that lets one write command per database at a time
// into FerretDB, so that through URI:
//
//   - concurrent writes to one document are serialized: a single-document update is atomic,
//     and a compare-and-set filter such as {_id, version} matches for exactly one of the
//     racing callers, as on MongoDB;
//   - that holds when clients go away too: a write whose client closes, resets or times out
//     before the answer still runs to its end in FerretDB (as it may on MongoDB), and no
//     other write enters FerretDB until it has ended;
//   - a write that would take a document past MongoDB's 16 MiB limit (maxBsonObjectSize)
//     is refused as MongoDB refuses it, and nothing of it is written: an inserted document
//     with BadValue (2, "object to insert too large"), an update with 17419 ("Resulting
//     document after update is larger than 16777216"), an upsert with 17420, each as the
//     write error of its statement, and a findAndModify with the same codes as a command
//     error. In a bulk write the other statements run as on MongoDB: an ordered one stops
//     at the refused statement, an unordered one runs all the others;
//   - reads (find, aggregate without $out or $merge, count, getMore, hello, …) are never
//     held back behind writes: they go to FerretDB at once;
//   - every other command, and every write that stays within the limit, still runs on
//     FerretDB, with its results and its gaps.
//
// Keeping the limit costs little in the common case. The front keeps an upper bound of the
// size of each document written through URI, by collection and _id (string or ObjectID),
// learned only while it holds the database's write slot. An insert sets the bound to the
// document's size once FerretDB reports it inserted. An update or findAndModify whose filter
// names its documents by _id ({_id: v}, {_id: {$eq: v}} or {_id: {$in: […]}}, with any other
// conditions) adds to each bound the most the update can add, or raises it to the size of
// a replacement. When every bound stays within the limit, the write goes to FerretDB
// with no read. Otherwise, and for a document without a known bound, the front reads the
// document by _id and uses its exact size. A write the front cannot attribute to _ids, or
// whose outcome it cannot know, makes it forget the bounds that write may touch.
//
// What always holds: for every collection and _id the front keeps a bound of, the document
// with that _id is no larger than the bound, as long as every write to the database goes
// through URI. A write through BareURI is not seen: after it, a bound may be lower than its
// document, and a later update through URI may then take that document past the limit.
//
// The rest costs more. An update or findAndModify whose filter does not name its documents
// by _id first reads every document the filter matches, and one that could bring a document
// near the limit is first tried on copies of them, in a collection named
// embedded.size_check of the same database that exists only while the try runs. A bulk
// write with such a statement runs one statement at a time. At most 131072 bounds are
// kept; past that they are all forgotten, and documents are read again.
//
// It does not:
//
//   - keep the size limit on writes other than insert, update and findAndModify (an
//     aggregate with $out or $merge). A refused statement of a multi-document update
//     changes none of its documents (MongoDB may have changed some before the one that
//     failed).
//   - make FerretDB MongoDB. Commands and operators FerretDB lacks or implements
//     differently (aggregation expressions, $push with $slice, $pull by condition, $expr,
//     TTL and partial indexes, …) behave as they do on FerretDB. In particular, a bulk
//     write of 100 updates or more is never answered. FerretDB then answers no command on
//     that collection, from any client (other databases still work). Through URI, every
//     write to its database waits behind it until its client gives up, and five minutes
//     more.
//   - provide transactions, change streams, replica-set or sharding behaviour. The server
//     is one standalone node, and FerretDB has none of these.
//   - make writes to one database concurrent. Writes from all clients to one database
//     queue for its slot, so a database's write throughput is that of one writer
//     (FerretDB's own ceiling on SQLite is hardly higher). Writes to different databases
//     run side by side: a store whose leases live in a database of their own renews them
//     without waiting behind its data writes.
//   - protect connections made to BareURI, which goes straight to FerretDB.
package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Dir is the SQLite data directory. It is created if missing and kept by Close. A server
	// holds a lock on it (the file execstore-embedded.lock in it) while it runs: Start on a
	// directory another embedded server serves, in any process, returns ErrDirInUse. The
	// lock goes with its process. Default "": a new temporary directory, removed by Close.
	Dir string

	// Addr is the address the front listens on; URI names the address it got.
	// Default "": "127.0.0.1:0", a free port on the loopback interface.
	Addr string

	// TLS, when set, makes the front accept only TLS connections with this configuration
	// (its Certificates are the server's); URI then carries tls=true, and clients need the
	// issuing CA (tlsCAFile=…). FerretDB itself stays behind the front on loopback.
	// Default nil: plain TCP.
	TLS *tls.Config

	// Logger receives FerretDB's log (attribute component=ferretdb) and the front's
	// (component=front: broken connections at level warn, every request at debug).
	// Default nil: both are discarded.
	Logger *slog.Logger
}

// Server is a running FerretDB with its front. Its methods are safe for concurrent use.
type Server struct {
	uri     string
	bareURI string

	front  *front
	guard  *sizeGuard         // the front's check; nil before it starts
	cancel context.CancelFunc // stops FerretDB
	done   chan struct{}      // closed when FerretDB's Run has returned; nil before it starts
	tmpDir string             // removed by Close; "" when the caller gave Dir
	lock   *dirLock           // the data directory's, released by Close

	closeOnce sync.Once
	closeErr  error
}

const (
	// readyPollInterval is how often Start retries its readiness check.
	readyPollInterval = 20 * time.Millisecond

	// guardCloseTimeout bounds closing the connections the front's size check keeps to
	// FerretDB; no check runs any more when they close.
	guardCloseTimeout = 10 * time.Second
)

// Start starts FerretDB and the front, and returns once both accept connections and
// answer hello. ctx bounds only the start; the server runs until Close. On error nothing
// is left running and a temporary directory it made is removed.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}

	s := &Server{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()

	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "execstore-ferretdb-*"); err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		s.tmpDir = dir
	} else if err = os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if s.lock, err = lockDir(dir); err != nil {
		return nil, err
	}

	stampVersion()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: sqliteURL(dir),
		Logger:    logger.With("component", "ferretdb"),
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: start FerretDB: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = f.Run(runCtx) // it only returns nil
	}()
	s.bareURI = f.MongoDBURI()
	bare, err := url.Parse(s.bareURI)
	if err != nil {
		return nil, fmt.Errorf("embedded: FerretDB's URI %q: %w", s.bareURI, err)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded: front: %w", err)
	}
	front := &url.URL{Scheme: "mongodb", Host: ln.Addr().String(), Path: "/"}
	dial := plainDial(ln.Addr().String())
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
		front.RawQuery = "tls=true"
		dial = tlsDial(ln.Addr().String())
	}
	if s.guard, err = newSizeGuard(s.bareURI); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s.front = startFront(ln, bare.Host, defaultDrainTimeout, s.guard, logger.With("component", "front"))
	s.uri = front.String()

	if err := s.waitReady(ctx, dial); err != nil {
		return nil, err
	}
	return s, nil
}

// sqliteURL returns the SQLite URI FerretDB wants for the directory dir: a file: URI whose
// path ends with a slash.
func sqliteURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return (&url.URL{Scheme: "file", Path: p, OmitHost: true}).String()
}

// waitReady polls hello through the front (dial reaches it), which also reaches FerretDB, until it
// succeeds, ctx ends or FerretDB stops.
func (s *Server) waitReady(ctx context.Context, dial dialFunc) error {
	t := time.NewTicker(readyPollInterval)
	defer t.Stop()
	for {
		err := hello(ctx, dial)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: server not ready: %w (last attempt: %v)", ctx.Err(), err)
		case <-s.done:
			return fmt.Errorf("embedded: FerretDB stopped during start (last attempt: %v)", err)
		case <-t.C:
		}
	}
}

// URI returns the connection string of the front, mongodb://127.0.0.1:PORT/. Use it: it is
// the server with MongoDB's single-document write atomicity.
func (s *Server) URI() string { return s.uri }

// BareURI returns the connection string of FerretDB itself, without the front. Writes made
// through it are not atomic; it exists to show that, and for diagnosis.
func (s *Server) BareURI() string { return s.bareURI }

// Close stops the front and FerretDB, closing every connection to either, waits for all
// their goroutines, and removes the data directory if Start made it. It may take up to
// three seconds when clients of BareURI are still connected: FerretDB gives them that long.
// Calls after the first return the first's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		// The front first: its connections to FerretDB close, so FerretDB does not wait
		// for them.
		if s.front != nil {
			errs = append(errs, s.front.close())
		}
		if s.guard != nil {
			ctx, cancel := context.WithTimeout(context.Background(), guardCloseTimeout)
			errs = append(errs, s.guard.close(ctx))
			cancel()
		}
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
		errs = append(errs, s.lock.release())
		if s.tmpDir != "" {
			errs = append(errs, os.RemoveAll(s.tmpDir))
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("embedded: close: %w", err)
		}
	})
	return s.closeErr
}
