//go:build unix

package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockBuild takes the machine-wide lock that serializes building the server, waiting for it
// as long as ctx allows, and returns its release. `go test ./...` runs several test binaries
// at once: without the lock, each would compile FerretDB at the same time on a cold cache;
// with it, the first compiles and the others find the go command's build cache filled.
func lockBuild(ctx context.Context) (func(), error) {
	path := filepath.Join(os.TempDir(), "execstore-testserver-build.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("testserver: build lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("testserver: build lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("testserver: waiting for another test binary's build of the server: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
