package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/embedded"
)

// TestEmbedded checks -embedded DIR: data written by the stores to an embedded server on
// DIR, stopped, is read by the command starting its own embedded server on DIR, in the
// default database.
func TestEmbedded(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writer, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err)
	populateAt(t, writer.URI(), "execstore")
	require.NoError(t, writer.Close())

	r := cli(t, "-embedded", dir, "show", "order-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, withoutCommitTimes(showOrder1), withoutCommitTimes(r.stdout))
	r = cli(t, "list", "-roots", "-embedded", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 executions; last page")
}

// -embedded DIR refuses a directory another embedded server serves, saying so, and reads
// nothing.
func TestEmbeddedDirInUse(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serving, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err)
	defer serving.Close()
	populateAt(t, serving.URI(), "execstore")

	r := cli(t, "-embedded", dir, "show", "order-1")
	assert.NotEqual(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "in use by another embedded server")
	assert.Contains(t, r.stderr, dir)
}
