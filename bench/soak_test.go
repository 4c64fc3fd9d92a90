package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A short soak on the suite's server (the embedded one unless MONGODB_URI names another):
// every event is driven, every checkpoint's documents are within the bound, and the
// retention deleted executions, those that armed timers included.
func TestSoakStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 800 events through a server")
	}
	const events = 800
	// A slack of 20 s: under the race detector on the embedded server an execution's last ack
	// has been measured to stay unwritten beyond the default 6 s.
	report, err := soakOnTheSuitesServer(t, "-soak", strconv.Itoa(events), "-soak-live", "20", "-soak-checkpoints", "4",
		"-soak-slack", "20s")
	require.NoError(t, err)
	require.EqualValues(t, events, report.events)
	require.NotEmpty(t, report.checkpoints)
	assert.Empty(t, report.failures())
	last := report.checkpoints[len(report.checkpoints)-1]
	assert.Positive(t, last.Deleted, "no execution deleted for its retention")
	assert.EqualValues(t, events, last.Events)
	for _, cp := range report.checkpoints {
		assert.True(t, cp.BoundMet, "at %d events: %d documents, bound %d", cp.Events, cp.Documents, cp.Bound)
		for _, name := range soakCosts {
			assert.Contains(t, cp.Costs, name)
		}
		if assert.NotNil(t, cp.IndexBytes, "at %d events: the indexes' size", cp.Events) {
			assert.Positive(t, *cp.IndexBytes)
		}
		assert.Nil(t, cp.ReindexMs, "no -soak-reindex, no rebuild")
	}
}

// With -soak-reindex each checkpoint rebuilds the indexes after its measures and reports it; a
// server without reIndex (the embedded one) fails the soak at its first checkpoint, saying so.
func TestSoakReindex(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 400 events through a server")
	}
	const events = 400
	report, err := soakOnTheSuitesServer(t, "-soak", strconv.Itoa(events), "-soak-live", "10", "-soak-checkpoints", "2",
		"-soak-slack", "20s", "-soak-reindex")
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 59 { // CommandNotFound
		assert.ErrorContains(t, err, "rebuilding the indexes (-soak-reindex)")
		t.Logf("the server has no reIndex: %v", err)
		return
	}
	require.NoError(t, err)
	require.NotEmpty(t, report.checkpoints)
	for _, cp := range report.checkpoints {
		require.NotNil(t, cp.ReindexMs, "at %d events", cp.Events)
		assert.GreaterOrEqual(t, *cp.ReindexMs, 0.0)
		require.NotNil(t, cp.IndexBytes)
		require.NotNil(t, cp.IndexBytesAfter)
		assert.Contains(t, indexCell(cp), " → ")
	}
}

// soakOnTheSuitesServer runs a soak with the flags args on the suite's server (the embedded
// one unless MONGODB_URI names another).
func soakOnTheSuitesServer(t *testing.T, args ...string) (*soakReport, error) {
	t.Helper()
	cfg, err := parseFlags(append(args, "-out", t.TempDir()), os.Getenv("MONGODB_URI"), io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := startEnvironment(ctx, cfg)
	require.NoError(t, err)
	defer func() { assert.NoError(t, env.close()) }()
	return runSoak(ctx, cfg, env)
}
