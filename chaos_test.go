package execstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// chaosProxy relays TCP connections to upstream and, while active, injects faults chosen by a
// seeded generator: latency spikes on either direction, and connection resets (RST) shortly
// after a client's request went through, so that writes are in flight inside the server when
// their connection dies.
type chaosProxy struct {
	*testserver.Relay
	active atomic.Bool
	resets atomic.Int64
	spikes atomic.Int64

	rngMu sync.Mutex
	rng   *rand.Rand
}

const (
	chaosResetChance = 0.1  // per request forwarded
	chaosSpikeChance = 0.05 // per chunk forwarded, either way
)

func newChaosProxy(t *testing.T, upstream string, seed uint64) *chaosProxy {
	p := &chaosProxy{Relay: testserver.NewRelay(t, "127.0.0.1:0", upstream), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	p.Start(func(client, server net.Conn) {
		p.Go(func() { p.pipe(server, client, true, client, server) })
		p.pipe(client, server, false, client, server)
	})
	t.Cleanup(func() { p.active.Store(false) }) // before the relay's own cleanup
	return p
}

func (p *chaosProxy) chance(prob float64) bool {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.Float64() < prob
}

func (p *chaosProxy) duration(lo, hi time.Duration) time.Duration {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return lo + time.Duration(p.rng.Int64N(int64(hi-lo)))
}

// pipe copies src to dst. Requests (client to server) may be followed by a reset of the
// pair; chunks either way may be held back for a spike.
func (p *chaosProxy) pipe(dst, src net.Conn, requests bool, client, server net.Conn) {
	defer p.Reset(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.active.Load() && p.chance(chaosSpikeChance) {
				p.spikes.Add(1)
				time.Sleep(p.duration(5*time.Millisecond, 60*time.Millisecond))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if requests && p.active.Load() && p.chance(chaosResetChance) {
				p.resets.Add(1)
				time.AfterFunc(p.duration(0, 4*time.Millisecond), func() { p.Reset(client, server) })
			}
		}
		if err != nil {
			return
		}
	}
}

// chaosSeeds returns the seeds to run: EXECSTORE_CHAOS_SEEDS (comma-separated), or two fixed
// ones (five with EXECSTORE_LONG=1).
func chaosSeeds(t *testing.T) []uint64 {
	if env := os.Getenv("EXECSTORE_CHAOS_SEEDS"); env != "" {
		var seeds []uint64
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			require.NoError(t, err, "EXECSTORE_CHAOS_SEEDS")
			seeds = append(seeds, n)
		}
		return seeds
	}
	if longRuns() {
		return []uint64{1, 2, 3, 4, 5}
	}
	return []uint64{1, 2}
}

// An engine runtime (a relay.Relay and its handlers, a relay.Sweeper; see engine) runs on a
// store whose connections suffer resets with writes in flight and latency spikes, while the
// server is stopped and started again on the same data, and the runtime itself is killed (its
// stores closed without draining, its relay and sweeper stopped, its handlers handing nothing
// more back) while many delivered entries wait for a handler, then started again: no
// acknowledged commit is lost, no version is acknowledged twice, every emitted event is
// processed exactly once, no acknowledged ack comes back, no entry is acked before a handler
// returned nil for it, no timer is deleted before it fired, and every execution's last timer
// fires. The failures the faults cause to handlers, scans and acks (outcomes unknown, reset
// connections, a server away) are retried by the relay and the sweeper; one no fault explains
// (a closed store, a missing execution) fails the test. On the embedded server, the test runs
// one of its own in this process, so that it can restart it. On the server MONGODB_URI names,
// which a test cannot restart, it runs every fault but the restart, on a database of its own.
func TestChaos(t *testing.T) {
	for _, seed := range chaosSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

func runChaos(t *testing.T, seed uint64) {
	ctx := context.Background()
	serverURI, database := srv.URI, testserver.Database(t, "chaos")
	var emb *testserver.Server // the test's own server, on the embedded server only
	dir := t.TempDir()
	if !srv.External {
		var err error
		emb, err = srv.Another(ctx, dir, "127.0.0.1:0")
		require.NoError(t, err)
		defer func() { emb.Close() }()
		serverURI, database = emb.URI, "chaos"
	}
	cs, err := connstring.Parse(serverURI)
	require.NoError(t, err)
	addr := cs.Hosts[0] // the restarted server listens here again
	restart := func() {
		if emb == nil {
			return // the server MONGODB_URI names stays up
		}
		require.NoError(t, emb.Close())
		time.Sleep(300 * time.Millisecond)
		emb, err = srv.Another(ctx, dir, addr)
		require.NoError(t, err)
	}

	proxy := newChaosProxy(t, addr, seed)
	// through is the server's URI (its credentials and options kept) with hostport in place of
	// the server's address, connected to directly.
	through := func(hostport string) string {
		u := strings.Replace(serverURI, addr, hostport, 1)
		if strings.Contains(u, "?") {
			u += "&"
		} else {
			u += "?"
		}
		return u + "directConnection=true&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=2000"
	}
	uri := through(proxy.Addr())
	// The handlers' requests are also held up (handlerDelay), so that the relay delivers
	// far ahead of the handling.
	slowURI := through(newDelayProxy(t, proxy.Addr(), handlerDelay).Addr())
	// A life of the runtime: the handlers in three processes and the relay in a fourth, each
	// with connections of its own: a reset stalls one of them while the others write on.
	life := func() (handlers []*aio.Store, relay *aio.Store) {
		for range 3 {
			s, err := aio.Open(ctx, slowURI, aio.Options{Connection: server.Connection{Database: database}})
			require.NoError(t, err)
			handlers = append(handlers, s)
		}
		relay, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: database}})
		require.NoError(t, err)
		return handlers, relay
	}

	executions, maxVersion := 16, int64(8)
	if longRuns() {
		executions, maxVersion = 48, 12
	}
	commits := executions * int(maxVersion-1) // every execution goes from version 1 to maxVersion

	handlers, relay := life()
	g := newEngine(handlers[0], executions, maxVersion)
	g.faults, g.relay, g.handlers = true, relay, handlers
	for i := range executions {
		id := fmt.Sprintf("x%d", i)
		_, err := relay.Commit(ctx, &execstore.Execution{ID: id, DefinitionID: "chain", Status: execstore.Running},
			execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: []byte(id + "/start")}}})
		require.NoError(t, err)
	}

	// First life: faults, a restart of the server a quarter of the way through, and the kill
	// halfway, while deliveries of three in four executions' chains wait for a handler.
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	firstCtx, kill := context.WithCancelCause(runCtx)
	defer kill(nil)
	done := make(chan error, 1)
	proxy.active.Store(true)
	go func() { done <- g.run(firstCtx, engineLanes) }()
	g.awaitPoint(t, commits/4, 0)
	restart()
	g.awaitPoint(t, commits/2, executions*3/4)
	g.kill(kill, append(handlers, relay)...)
	require.ErrorIs(t, <-done, errKilled, "the first life should have been cut short by the kill, and by nothing else")

	// Second life: new stores (opened without faults: a process retries its start-up) recover
	// by relaying what is pending, through faults for a while.
	proxy.active.Store(false)
	handlers, relay = life()
	for _, s := range append(handlers, relay) {
		defer s.Close(ctx)
	}
	g.store, g.relay, g.handlers = handlers[0], relay, handlers
	proxy.active.Store(true)
	go func() { done <- g.run(runCtx, engineLanes) }()
	time.Sleep(1500 * time.Millisecond)
	proxy.active.Store(false)
	require.NoError(t, <-done, "the run did not finish")

	client, err := mongo.Connect(options.Client().ApplyURI(serverURI))
	require.NoError(t, err)
	defer client.Disconnect(ctx)
	processed := g.verify(t, client.Database(database), relay)
	restarts := "a restart"
	if srv.External {
		restarts = "no restart (the server is not the test's)"
	}
	t.Logf("seed %d: %d events processed exactly once through %d resets, %d latency spikes, %s and a kill; %s",
		seed, processed, proxy.resets.Load(), proxy.spikes.Load(), restarts, g.report())
	assert.Positive(t, proxy.resets.Load(), "no reset was injected")
}
