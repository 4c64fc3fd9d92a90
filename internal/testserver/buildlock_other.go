//go:build !unix

package testserver

import "context"

// lockBuild does nothing where there is no flock: test binaries then build side by side,
// which costs time on a cold cache and nothing else.
func lockBuild(context.Context) (func(), error) { return func() {}, nil }
