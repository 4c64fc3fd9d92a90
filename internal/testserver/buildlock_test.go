//go:build unix

package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The build lock admits one holder at a time: a second waits until the first lets go, and
// gives up when its context ends.
func TestBuildLockAdmitsOneHolder(t *testing.T) {
	unlock, err := lockBuild(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = lockBuild(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second holder while the first holds it")

	got := make(chan error, 1)
	go func() {
		unlock2, err := lockBuild(context.Background())
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	unlock()
	require.NoError(t, <-got, "the waiter takes the lock once it is released")
}
