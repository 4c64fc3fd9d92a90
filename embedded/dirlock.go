package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrDirInUse is returned by Start when another embedded server, in this process or another,
// serves Options.Dir: two servers on one SQLite directory would each cache what the other
// changes. Match it with errors.Is.
var ErrDirInUse = errors.New("embedded: the data directory is in use by another embedded server")

// lockName is the file in a data directory whose lock a server holds while it runs.
const lockName = "execstore-embedded.lock"

// dirLock is the lock on a data directory: an exclusive advisory lock on its lock file, held
// until release or the process's end (a crashed server leaves no lock behind, only the
// file). The file holds the process id of its last holder, for the error of the next.
type dirLock struct {
	f *os.File
}

// lockDir takes dir's lock, or returns an error matching ErrDirInUse.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	locked, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	if !locked {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			holder = "process " + strconv.Itoa(pid)
			if pid == os.Getpid() {
				holder = "this process"
			}
		}
		return nil, fmt.Errorf("%w: %s (held by %s); stop that server, or give this one another directory", ErrDirInUse, dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release gives the lock up.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	unlock(l.f)
	return l.f.Close()
}
