//go:build unix

package embedded

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive lock without waiting, and reports whether it did. flock locks
// belong to the open file, so a second open in this process is refused too.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	default:
		return false, err
	}
}

func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
