package aio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// While the server does not answer, a caller whose commit waits for a batch slot gets its
// context error on time (never sent), one whose batch was sent gets ErrOutcomeUnknown on
// time, and Close returns within its context. The server stalls until the test ends, so an
// answer at all is its context's: answeredWithin, far past the contexts' deadlines, only
// keeps a store that waits for the server from hanging the test.
func TestCallersAnsweredOnTimeWhileServerStalls(t *testing.T) {
	proxy, uri := proxied(t)
	h := newHarness(t, aio.Options{})
	s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database}, MaxBatchesInFlight: 1})
	require.NoError(t, err)

	a, b := newExe("a"), newExe("b")
	require.NoError(t, s.Save(bg, a))
	require.NoError(t, s.Save(bg, b))
	proxy.Stalled.Store(true)

	// a's context outlasts the wait for its batch to reach the proxy and b's whole wait, so b
	// waits for the slot a holds however slowly the machine runs.
	sentCtx, cancelSent := context.WithTimeout(bg, 3*time.Second)
	defer cancelSent()
	held := proxy.HeldRequests()
	sent := s.CommitAsync(sentCtx, a, execstore.Commit{})
	require.Eventually(t, func() bool { return proxy.HeldRequests() > held }, 2*time.Second, time.Millisecond,
		"a's batch is on the wire and holds the only slot")

	start := time.Now()
	queuedCtx, cancelQueued := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancelQueued()
	_, err = s.Commit(queuedCtx, b, execstore.Commit{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "b was never sent")
	assert.Less(t, time.Since(start), answeredWithin)
	assert.EqualValues(t, 1, b.Version)

	_, err = sent.Wait(sentCtx)
	assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), answeredWithin)

	stuck := s.CommitAsync(bg, b, execstore.Commit{}) // a caller that never gives up
	closeCtx, cancelClose := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelClose()
	start = time.Now()
	err = s.Close(closeCtx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), answeredWithin)
	_, err = stuck.Result()
	assert.Error(t, err)

}

// answeredWithin bounds how long a caller of TestCallersAnsweredOnTimeWhileServerStalls
// waits past its context's deadline (200 ms to 3 s): a bound a busy machine
// does not reach, well short of the test's own timeout.
const answeredWithin = 10 * time.Second

// proxiedStall is DisableRemoteWakes for the stores these tests open through a stall proxy:
// the board's reads and writes, off the commits' path, would hold the proxy's connections,
// and a commit would wait for a connection the proxy stalls rather than be the request it
// stalls. The board is tested in board_test.go.
const proxiedStall = true

// proxied returns a stall proxy in front of the test server and the URI that goes through it,
// with the driver's retryable writes off: on a replica set (MONGODB_URI) the driver would
// otherwise send a write again after the reset these tests cause, and what they observe is
// what the store makes of the reset itself. TestConnectionResetAfterSend also runs with them.
func proxied(t *testing.T) (*testserver.StallProxy, string) {
	return testserver.Proxied(t, srv.URI, "&heartbeatFrequencyMS=500&retryWrites=false")
}

// proxiedRetrying is proxied with the driver's retryable writes left on.
func proxiedRetrying(t *testing.T) (*testserver.StallProxy, string) {
	return testserver.Proxied(t, srv.URI, "&heartbeatFrequencyMS=500")
}

// A connection reset after a commit was sent: ErrOutcomeUnknown, and a reload shows the whole
// commit (the server got it) or none of it (it did not) — never part. The store recovers by
// itself, and the collection's invariants hold. With the driver's retryable writes (its
// default, used by a replica set or a sharded cluster, never by a standalone server such as
// the embedded one) the driver may send the write again on a new connection and the commit
// succeed: then the server has it whole.
func TestConnectionResetAfterSend(t *testing.T) {
	type resetMode struct {
		name       string
		answerOnly bool // the request reaches the server; only its answer is lost
		grouped    bool
		retries    bool // the driver's retryable writes are on
	}
	modes := []resetMode{
		{"request lost, single", false, false, false}, {"answer lost, single", true, false, false},
		{"request lost, group", false, true, false}, {"answer lost, group", true, true, false},
	}
	if srv.External {
		// On the embedded server the driver never retries a write: these would repeat the
		// modes above.
		modes = append(modes,
			resetMode{"request lost, single, retryable writes", false, false, true},
			resetMode{"answer lost, single, retryable writes", true, false, true},
			resetMode{"request lost, group, retryable writes", false, true, true},
			resetMode{"answer lost, group, retryable writes", true, true, true})
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			through := proxied
			if mode.retries {
				through = proxiedRetrying
			}
			proxy, uri := through(t)
			h := newHarness(t, aio.Options{})
			logged := &logBuffer{}
			s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database,
				Logger: slog.New(slog.NewJSONHandler(logged, nil))}, DisableGroupCommit: !mode.grouped})
			require.NoError(t, err)
			defer s.Close(bg)
			e := newExe("e")
			// Reserve the seq blocks first, so the reset hits the commit itself.
			_, err = s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("warm")}},
				Spawns: []execstore.Spawn{{ChildID: "warm"}}})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return s.Stats().SeqBlocks >= 2 }, 5*time.Second, 10*time.Millisecond)
			unknown := 0
			for round := range 3 {
				if mode.answerOnly {
					proxy.AnswersStalled.Store(true)
				} else {
					proxy.Stalled.Store(true)
				}
				c := execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte{byte(round)}}},
					ProcessedEventID: "p" + string(rune('a'+round)),
					Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(float64(round)))},
					Spawns:           []execstore.Spawn{{ChildID: "c" + string(rune('a'+round)), RootPath: "F.A"}},
					Trace:            map[string]any{"r": int64(round)},
				}
				before := *e
				prior := h.rawDoc(t, "e")
				held := proxy.HeldRequests()
				f := s.CommitAsync(bg, e, c)
				if mode.answerOnly {
					h.awaitVersion(t, "e", before.Version+1) // sent, and applied
				} else {
					require.Eventually(t, func() bool { return proxy.HeldRequests() > held }, 10*time.Second, time.Millisecond,
						"round %d: sent, and held by the proxy", round)
				}
				proxy.CloseAll()
				proxy.Stalled.Store(false)
				proxy.AnswersStalled.Store(false)
				_, commitErr := f.Wait(bg)
				if commitErr == nil {
					// A group commit settles its outcome with a read after the failure: it may
					// prove the commit won. A retried write is answered on its new connection,
					// by the server that applied it once. It is never a guess.
					require.True(t, mode.retries || (mode.grouped && mode.answerOnly), "round %d: success reported for a lost request", round)
				} else {
					require.ErrorIs(t, commitErr, execstore.ErrOutcomeUnknown, "round %d", round)
					unknown++
				}
				// Recover as a runtime would: reload, then go on.
				got, err := s.Load(bg, "e")
				require.NoError(t, err, "the store did not recover")
				checkInvariants(t, h)
				doc := h.rawDoc(t, "e")
				applied := rawInt(t, doc, "version") == before.Version+1
				// The whole commit or none of it: snapshot version, outbox entry, dedupe mark,
				// timer, spawn intent and trace step together.
				parts := map[string]bool{
					"outbox": rawInt(t, doc, "outbox_n") == rawInt(t, prior, "outbox_n")+1,
					"dedupe": containsString(t, doc, "processed", c.ProcessedEventID),
					"timer":  doc.Lookup("timers", "T").Type == bson.TypeDouble && doc.Lookup("timers", "T").Double() == float64(round),
					"spawn":  rawInt(t, doc, "spawns_n") == rawInt(t, prior, "spawns_n")+1,
					"trace":  rawInt(t, doc, "trace_next") == rawInt(t, prior, "trace_next")+1,
				}
				for part, present := range parts {
					assert.Equal(t, applied, present, "round %d: %s present=%v but the commit applied=%v", round, part, present, applied)
				}
				switch {
				case mode.answerOnly:
					assert.True(t, applied, "the server had the commit")
				case commitErr == nil:
					assert.True(t, applied, "round %d: success reported for a commit the server does not have", round)
				case !mode.retries:
					assert.False(t, applied, "the server never got the commit")
				}
				*e = *got
			}
			// Each unknown outcome was logged for the operator: a warning naming the commit.
			warnings := logged.records(t, "WARN")
			assert.Len(t, warnings, unknown, "one warning per unknown outcome")
			for _, w := range warnings {
				assert.Equal(t, "aio", w["store"])
				assert.Equal(t, "commit", w["op"])
			}
		})
	}
}

// logBuffer collects a slog JSON handler's records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the records logged at level.
func (b *logBuffer) records(t *testing.T, level string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}

// checkInvariants checks every execution of h's database: each outbox entry and spawn intent
// belongs to a committed version, the pending counts match, no dedupe mark or trace step is
// there without the commits that wrote them.
func checkInvariants(t *testing.T, h *harness) {
	t.Helper()
	cur, err := h.db.Collection("executions").Find(bg, bson.D{})
	require.NoError(t, err)
	defer cur.Close(bg)
	for cur.Next(bg) {
		doc := cur.Current
		id := doc.Lookup("_id").StringValue()
		version := rawInt(t, doc, "version")
		for _, field := range []string{"outbox", "spawns"} {
			elems, err := doc.Lookup(field).Document().Elements()
			require.NoError(t, err)
			assert.EqualValues(t, len(elems), rawInt(t, doc, field+"_n"), "%s: %s_n", id, field)
			for _, el := range elems {
				v, ok := el.Value().Document().Lookup("v").AsInt64OK()
				assert.True(t, ok)
				assert.LessOrEqual(t, v, version, "%s: %s entry from version %d beyond %d", id, field, v, version)
			}
		}
		marks := rawLen(t, doc, "processed")
		assert.LessOrEqual(t, int64(marks), version, "%s: more dedupe marks than commits", id)
		assert.LessOrEqual(t, rawInt(t, doc, "trace_next"), version+1000, "%s", id)
	}
	require.NoError(t, cur.Err())
}

func containsString(t *testing.T, doc bson.Raw, field, want string) bool {
	t.Helper()
	vals, err := doc.Lookup(field).Array().Values()
	require.NoError(t, err)
	for _, v := range vals {
		if v.StringValue() == want {
			return true
		}
	}
	return false
}

// A group commit whose bulk write was answered later than SettleTimeout still settles its
// outcome: the settling read-back has SettleTimeout from its own start. The stall proxy holds
// the answer of a stale commit's bulk write for longer than SettleTimeout; the commit is
// reported as the conflict it is, not as of unknown outcome.
func TestGroupCommitSettlesAfterALateAnswer(t *testing.T) {
	proxy, uri := proxied(t)
	const settle, held = time.Second, 3 * time.Second // a margin for the settling read on a loaded machine
	var holding atomic.Bool
	monitor := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName == "update" && holding.CompareAndSwap(true, false) {
			proxy.AnswersStalled.Store(true)
			time.AfterFunc(held, func() { proxy.AnswersStalled.Store(false) })
		}
	}}
	h := newHarness(t, aio.Options{})
	s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database, SettleTimeout: settle,
		ClientOptions: options.Client().SetMonitor(monitor)}})
	require.NoError(t, err)
	defer s.Close(bg)

	e := newExe("late")
	require.NoError(t, s.Save(bg, e))
	stale := *e
	_, err = s.Commit(bg, e, execstore.Commit{})
	require.NoError(t, err)
	groups := s.Stats().GroupCommits
	holding.Store(true)
	_, err = s.Commit(bg, &stale, execstore.Commit{})
	var conflict *execstore.ConflictError
	require.ErrorAs(t, err, &conflict, "the answer came %v late, past SettleTimeout %v", held, settle)
	assert.Equal(t, e.Version, conflict.Found)
	assert.Greater(t, s.Stats().GroupCommits, groups, "the commit went through the group commit")
}
