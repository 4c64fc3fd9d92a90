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
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/internal/testserver"
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

// An engine runtime (handlers, relay, sweep; see engine) runs on a store whose connections
// suffer resets with writes in flight and latency spikes, while the server is stopped and
// started again on the same data: no acknowledged commit is lost, no version is acknowledged
// twice, every emitted event is processed exactly once, no acknowledged ack comes back, and
// every execution's last timer fires. The embedded server runs in this process here, so that
// the test can restart it.
func TestChaos(t *testing.T) {
	server.RequireEmbedded(t, "the chaos test stops and restarts an embedded server of its own mid-run; "+
		"the server MONGODB_URI names cannot be restarted by a test")
	for _, seed := range chaosSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

func runChaos(t *testing.T, seed uint64) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err)
	defer func() { srv.Close() }()
	cs, err := connstring.Parse(srv.URI())
	require.NoError(t, err)
	addr := cs.Hosts[0] // the restarted server listens here again

	proxy := newChaosProxy(t, addr, seed)
	uri := "mongodb://" + proxy.Addr() +
		"/?directConnection=true&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=2000"
	// The handlers run in three processes and the relay in a fourth, each with connections
	// of its own: a reset stalls one of them while the others write on.
	var stores []*aio.Store
	for range 4 {
		s, err := aio.Open(ctx, uri, aio.Options{Database: "chaos"})
		require.NoError(t, err)
		defer s.Close(ctx)
		stores = append(stores, s)
	}
	store, relay := stores[0], stores[3]

	executions, maxVersion := 16, int64(8)
	if longRuns() {
		executions, maxVersion = 48, 12
	}

	g := newEngine(store, executions, maxVersion)
	g.retry, g.relay, g.handlers = true, relay, stores[:3]
	for i := range executions {
		id := fmt.Sprintf("x%d", i)
		_, err := store.Commit(ctx, &execstore.Execution{ID: id, DefinitionID: "chain", Status: execstore.Running},
			execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: []byte(id + "/start")}}})
		require.NoError(t, err)
	}

	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	proxy.active.Store(true)
	go func() { done <- g.run(runCtx, 6) }()

	// Faults for a while, with one restart of the server in the middle.
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, srv.Close())
	time.Sleep(300 * time.Millisecond)
	srv, err = embedded.Start(ctx, embedded.Options{Dir: dir, Addr: addr})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	proxy.active.Store(false)
	require.NoError(t, <-done, "the run did not finish")

	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	require.NoError(t, err)
	defer client.Disconnect(ctx)
	processed := g.verify(t, client.Database("chaos"), store)
	t.Logf("seed %d: %d events processed exactly once through %d resets, %d latency spikes and a restart",
		seed, processed, proxy.resets.Load(), proxy.spikes.Load())
	assert.Positive(t, proxy.resets.Load(), "no reset was injected")
}
