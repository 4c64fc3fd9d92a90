package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// readCommands are the commands a read-only session may send: reads, the handshake and
// identification, authentication, and the cleanup of cursors and sessions.
var readCommands = []string{"hello", "isMaster", "ismaster", "buildInfo", "ping", "find", "aggregate", "getMore",
	"count", "listCollections", "listIndexes", "killCursors", "endSessions", "saslStart", "saslContinue"}

// TestReadOnly runs every command (revive and discard without -yes: their dry runs), and
// each kind of failure after connecting, with a command monitor on its client, and checks
// that only reads were sent: no insert, update, delete, findAndModify, createIndexes or any
// other write.
func TestReadOnly(t *testing.T) {
	f := populate(t)
	leases := openLeases(t, f)
	for _, key := range []string{"execstore/relay/outbox/members/r1", "execstore/relay/outbox/partitions/0"} {
		_, err := leases.Claim(context.Background(), key, "execstore/relay/lease", 1, time.Hour)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	sent := map[string]int{}
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		sent[e.CommandName]++
	}}
	copts := options.Client().SetMonitor(monitor)
	for _, args := range [][]string{
		{"show", "order-1", "-dedupe", "-trace", "100"},
		{"show", "order-1", "-json"},
		{"show", "nope"},
		{"list"},
		{"list", "-status", "RUNNING,DONE", "-definition", "checkout", "-roots", "-limit", "1", "-after", "order-1", "-json"},
		{"outbox", "-limit", "1"},
		{"timers", "-limit", "1"},
		{"timers", "-json"},
		{"backlog"},
		{"backlog", "-json"},
		{"dead", "-json"},
		{"dead", "-definition", "checkout", "-error", "x", "-older-than", "1h", "-kind", "outbox,timer"},
		{"revive", "-all"},
		{"discard", "-kind", "timer", "-json"},
		{"idem", "get", "req-done", "-body"},
		{"idem", "get", "req-lapsed", "-json"},
		{"idem", "get", "nope"},
		{"idem", "list", "req-"},
		{"idem", "list", "req-", "-limit", "1", "-after", "req-claimed", "-json"},
		{"relays"},
		{"relays", "-json"},
		{"relays", "-lease-key", "execstore/relay/timers"},
		{"journal", "show", "pay-1"},
		{"journal", "show", "nope", "-json"},
		{"journal", "retention"},
		{"journal", "retention", "-json"},
		{"server"},
		{"rates"},
		{"rates", "-minutes", "60", "-json"},
	} {
		r := runWith(t, "", copts, append([]string{"-uri", srv.URI, "-db", f.db}, args...)...)
		require.Contains(t, []int{0, 1}, r.code, "%q: %s", args, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, sent["find"], "the monitor saw the reads: %v", sent)
	for name := range sent {
		require.True(t, slices.Contains(readCommands, name), "sent %q, not a read (all sent: %v)", name, sent)
	}
}
