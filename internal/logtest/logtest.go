// Package logtest holds what tests of log lines share: Buffer, where a logger of several
// goroutines writes.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger's concurrent writes. Its zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
