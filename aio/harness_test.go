package aio_test

import (
	"strings"
	"time"

	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
)

// harness is one store on a database of its own, plus a raw view of that database.
type harness struct {
	store *aio.Store
	db    *mongo.Database
	opts  aio.Options
	cmds  *commandLog
}

// commandLog records the commands a store's client sends.
type commandLog struct {
	mu       sync.Mutex
	names    []string
	commands []bson.Raw
	running  map[string]int // commands sent and not yet answered, by name
	peak     map[string]int // the most ever running at once, by name
}

func (l *commandLog) monitor() *mongoevent.CommandMonitor {
	done := func(name string) {
		l.mu.Lock()
		l.running[name]--
		l.mu.Unlock()
	}
	return &mongoevent.CommandMonitor{
		Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
			if strings.HasSuffix(e.DatabaseName, "_wakes") {
				return // the board's reads and writes, off the commits' path (board_test.go counts them)
			}
			l.mu.Lock()
			l.names = append(l.names, e.CommandName)
			l.commands = append(l.commands, append(bson.Raw(nil), e.Command...))
			if l.running == nil {
				l.running, l.peak = map[string]int{}, map[string]int{}
			}
			l.running[e.CommandName]++
			l.peak[e.CommandName] = max(l.peak[e.CommandName], l.running[e.CommandName])
			l.mu.Unlock()
		},
		Succeeded: func(_ context.Context, e *mongoevent.CommandSucceededEvent) {
			if !strings.HasSuffix(e.DatabaseName, "_wakes") {
				done(e.CommandName)
			}
		},
		Failed: func(_ context.Context, e *mongoevent.CommandFailedEvent) {
			if !strings.HasSuffix(e.DatabaseName, "_wakes") {
				done(e.CommandName)
			}
		},
	}
}

// peakRunning returns the most commands named name that were ever running at once.
func (l *commandLog) peakRunning(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak[name]
}

func (l *commandLog) reset() {
	l.mu.Lock()
	l.names, l.commands = nil, nil
	l.mu.Unlock()
}

// command returns the last command named name that was sent.
func (l *commandLog) command(name string) bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.names) - 1; i >= 0; i-- {
		if l.names[i] == name {
			return l.commands[i]
		}
	}
	return nil
}

func (l *commandLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

func newHarness(t testing.TB, opts aio.Options) *harness {
	t.Helper()
	if opts.Database == "" {
		opts.Database = testDatabase(t)
	}
	log := &commandLog{}
	opts.ClientOptions = options.Client().SetMonitor(log.monitor())
	s, db := aiotest.Open(t, srv.URI, opts)
	return &harness{store: s, db: db, opts: opts, cmds: log}
}

// reopen returns a second store on the same database with other options.
func (h *harness) reopen(t testing.TB, opts aio.Options) *aio.Store {
	t.Helper()
	opts.Database = h.opts.Database
	return aiotest.Reopen(t, srv.URI, opts)
}

// rawDoc reads the stored document of id in one read, bypassing the store.
func (h *harness) rawDoc(t testing.TB, id string) bson.Raw {
	t.Helper()
	raw, err := h.db.Collection("executions").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	require.NoError(t, err)
	return raw
}

// rawInt reads an integer field of a stored document, whatever BSON number type holds it.
var rawInt = aiotest.RawInt

// rawLen returns the number of elements of an array or keys of a sub-document.
func rawLen(t testing.TB, doc bson.Raw, path ...string) int {
	t.Helper()
	v, err := doc.LookupErr(path...)
	require.NoError(t, err, "%v", path)
	elems, err := bson.Raw(v.Value).Elements()
	require.NoError(t, err)
	return len(elems)
}

func (h *harness) count(t testing.TB) int64 {
	t.Helper()
	n, err := h.db.Collection("executions").CountDocuments(context.Background(), bson.D{})
	require.NoError(t, err)
	return n
}

func newExe(id string) *execstore.Execution {
	return &execstore.Execution{ID: id, DefinitionID: "def", Status: execstore.Running, Data: []byte(`{"n":0}`)}
}

var bg = context.Background()

// testCacheSize is the snapshot cache of the tests that turn it on: more executions than any
// test uses, so that nothing is evicted unless a test means it.
const testCacheSize = 1024

// grouping returns opts with group commit and coalescing on or off.
func grouping(on bool, opts aio.Options) aio.Options {
	opts.DisableGroupCommit, opts.DisableCoalescing = !on, !on
	return opts
}

// bothGroupings runs test with group commit and coalescing on, then off.
func bothGroupings(t *testing.T, test func(t *testing.T, opts aio.Options)) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("grouped=%v", on), func(t *testing.T) { test(t, grouping(on, aio.Options{})) })
	}
}

// awaitVersion waits until the stored document of id, read straight from the server (not
// through a test's proxy), is at version: a write whose answer a proxy holds has then been
// applied, however slow the machine.
func (h *harness) awaitVersion(t testing.TB, id string, version int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		doc := h.rawDoc(t, id)
		return doc != nil && rawInt(t, doc, "version") == version
	}, 30*time.Second, 5*time.Millisecond, "%s never reached version %d", id, version)
}
