// Command embedded-server runs the embedded server (FerretDB behind its write-serializing
// front, see package embedded) as a process of its own.
//
// It prints two lines to standard output once the server accepts connections:
//
//	URI=<connection string of the front>
//	BARE=<connection string of FerretDB itself>
//
// and serves until its standard input reaches end of file, or it gets SIGINT or SIGTERM;
// then it closes the server and exits. A parent that starts it with a pipe as standard
// input therefore never leaves it behind: when the parent dies, the pipe closes.
//
// Usage:
//
//	embedded-server [-dir DIR] [-addr HOST:PORT] [-log]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/execstore/execstore/embedded"
)

// startTimeout bounds the server's start.
const startTimeout = time.Minute

func main() {
	dir := flag.String("dir", "", "SQLite data directory, kept on exit (default: a temporary directory, removed on exit)")
	addr := flag.String("addr", "127.0.0.1:0", "address the front listens on")
	logToStderr := flag.Bool("log", false, "write FerretDB's and the front's log (level info) to standard error")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, *addr, *logToStderr); err != nil {
		fmt.Fprintln(os.Stderr, "embedded-server:", err)
		os.Exit(1)
	}
}

func run(dir, addr string, logToStderr bool) error {
	opts := embedded.Options{Dir: dir, Addr: addr}
	if logToStderr {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	srv, err := embedded.Start(startCtx, opts)
	cancel()
	if err != nil {
		return err
	}

	if _, err := fmt.Printf("URI=%s\nBARE=%s\n", srv.URI(), srv.BareURI()); err != nil {
		return errors.Join(err, srv.Close())
	}

	stdinClosed := make(chan struct{})
	go func() {
		defer close(stdinClosed)
		_, _ = io.Copy(io.Discard, os.Stdin)
	}()
	select {
	case <-stdinClosed:
	case <-ctx.Done():
	}
	return srv.Close()
}
