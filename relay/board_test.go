package relay_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/internal/wake"
)

// A relay process whose Relay and Sweeper poll once an hour delivers the entries and fires
// the timer that this process commits once its first scans are done and the board lists its
// partitions: the commits wake it through the store's board, and nothing else could within
// the test's wait.
func TestBoardWakesAnotherProcess(t *testing.T) {
	store, board, c := startBoardProcess(t)
	n := store.Partitions()
	// Settled: both hold every partition, and their scans stopped (the ones the takes asked
	// for are done; the next poll is an hour away).
	var scans map[string]int64
	eventually(t, func() bool {
		last := lastStats(c.current())
		settled := scans != nil && len(last) == 2
		for of, l := range last {
			settled = settled && l.Partitions == n && l.Scans == scans[of]
		}
		scans = map[string]int64{}
		for of, l := range last {
			scans[of] = l.Scans
		}
		if !settled {
			time.Sleep(10 * childStats) // a few of its Stats lines apart
		}
		return settled
	}, "the relay process holds every partition and stops scanning")
	boardLists(t, board, n, wake.Outbox, wake.Timers)

	e := newEmitter(t, store)
	const entries = 20
	for i := range entries {
		e.emit(fmt.Sprintf("src-%d", i), "dst", "ev")
	}
	fireAt := time.Now().Add(500 * time.Millisecond)
	e.schedule("clock", "t1", fireAt)
	eventually(t, func() bool { return c.count("deliver") == entries && c.count("fire") == 1 },
		"the relay process delivers the %d entries and fires the timer", entries)
	require.NoError(t, c.stop())
	var fired logLine
	for _, l := range c.lines(t) {
		if l.Kind == "fire" {
			fired = l
		}
	}
	assert.GreaterOrEqual(t, fired.Start, fireAt.Truncate(time.Millisecond).UnixNano(), "the timer fired before its fire time")
	t.Logf("the timer fired %v after its fire time", time.Unix(0, fired.Start).Sub(fireAt))
	last := lastStats(c.lines(t))
	assert.GreaterOrEqual(t, last["outbox"].Woken, int64(1), "the Relay was woken")
	assert.GreaterOrEqual(t, last["timers"].Woken, int64(1), "the Sweeper was woken")
	t.Logf("woken: Relay %d, Sweeper %d", last["outbox"].Woken, last["timers"].Woken)
}

// A relay process that read an execution's first commit takes the entries of its next
// ones from their marks, with no read: the marks carry them. The board lists its partitions
// before the first commit.
func TestBoardCarriesEntriesToAnotherProcess(t *testing.T) {
	store, board, c := startBoardProcess(t)
	n := store.Partitions()
	eventually(t, func() bool {
		last := lastStats(c.current())
		return last["outbox"].Partitions == n
	}, "the relay process holds every partition")
	boardLists(t, board, n, wake.Outbox)

	e := newEmitter(t, store)
	const sources, waves = 10, 4
	for w := range waves {
		for i := range sources {
			e.emit(fmt.Sprintf("src-%d", i), "dst", "ev")
		}
		eventually(t, func() bool { return c.count("deliver") == (w+1)*sources },
			"the relay process delivers wave %d", w)
	}
	eventually(t, func() bool {
		last := lastStats(c.current())["outbox"]
		return last.HandedOver+last.Targeted+last.Scans > 0
	}, "a stats line after the deliveries")
	require.NoError(t, c.stop())
	last := lastStats(c.lines(t))["outbox"]
	t.Logf("Relay: handed over %d, targeted reads %d, scans %d", last.HandedOver, last.Targeted, last.Scans)
	assert.GreaterOrEqual(t, last.HandedOver, int64(1), "entries taken from the marks that carried them")
	assert.Equal(t, waves*sources, c.count("deliver"), "each entry delivered once")
}

// startBoardProcess opens a store on a database of its own, and starts a relay process on
// it whose Relay and Sweeper poll once an hour: only the board wakes them. It returns the
// board's database too.
func startBoardProcess(t *testing.T) (*aio.Store, *mongo.Database, *relayProcess) {
	var opts aio.Options
	opts.Database = testserver.Database(t, "relay")
	store, db := aiotest.Open(t, srv.URI, opts)
	leasesDB := testserver.Collection(t, srv.URI, opts.Database+"_leases", "idempotency").Database()
	t.Cleanup(func() { _ = leasesDB.Drop(context.Background()) })
	dir, err := os.MkdirTemp("", "relay-board-*")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay process's logs are in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	board := db.Client().Database(opts.Database + "_wakes")
	return store, board, startRelayProcess(t, "p1", opts.Database, dir, idleLeases.lease, envChildPoll+"=1h")
}

// boardLists waits until a holder of each of kinds lists all n partitions in board (aio's
// records: k, the kind; p, the partitions). A relay publishes a partition it took at its
// next tick or round, and a store marks only the holders its read of the board found: a
// commit between the take and that read is found by a poll, an hour away here.
func boardLists(t *testing.T, board *mongo.Database, n int, kinds ...wake.Kind) {
	t.Helper()
	eventually(t, func() bool {
		names, err := board.ListCollectionNames(bg, bson.D{})
		if err != nil {
			return false
		}
		listed := map[wake.Kind]bool{}
		for _, name := range names {
			cur, err := board.Collection(name).Find(bg, bson.D{})
			if err != nil {
				return false
			}
			var records []struct {
				Kind  wake.Kind `bson:"k"`
				Parts []int     `bson:"p"`
			}
			if cur.All(bg, &records) != nil {
				return false
			}
			for _, r := range records {
				listed[r.Kind] = listed[r.Kind] || len(r.Parts) == n
			}
		}
		for _, k := range kinds {
			if !listed[k] {
				return false
			}
		}
		return true
	}, "the board lists the %d partitions of %v", n, kinds)
}

// lastStats is the last "stats" line of each relay of a process's log, by Of.
func lastStats(lines []logLine) map[string]logLine {
	last := map[string]logLine{}
	for _, l := range lines {
		if l.Kind == "stats" {
			last[l.Of] = l
		}
	}
	return last
}
