package batch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/batch"
)

// simFlushes is the history of a simulated Coalescer: every batch flushed, and how many
// items were submitted, started and flushes in flight, all under mu.
type simFlushes struct {
	mu        sync.Mutex
	batches   [][]int
	submitted int // Submits returned
	started   int // items whose flush started
	inFlight  int
	maxIn     int
	// backlogs is how many of the flushes in flight are of a batch a backlog could make: at
	// least BacklogItems items, or closed sooner by MaxItems or MaxBytes.
	backlogs int
}

// TestCoalescerSimulated runs seeded plans of concurrent Submits, with flushes of random
// lengths, in virtual time, and checks the history against the Coalescer's promises: every
// item flushed once, each batch a run of consecutive submissions within the caps, at most
// MaxInFlight flushes at once, and, whenever nothing can happen before time passes, no item
// waiting while an eager slot is free, no backlog waiting while any slot is free, and every
// flush past EagerInFlight one of a backlog.
func TestCoalescerSimulated(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { simulateCoalescer(t, seed) })
		})
	}
}

func simulateCoalescer(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := batch.CoalescerConfig{MaxInFlight: 1 + rng.IntN(6), MaxItems: 1 + rng.IntN(8), MaxBytes: 3 + rng.IntN(20),
		BacklogItems: 1 + rng.IntN(8)}
	cfg.EagerInFlight = 1 + rng.IntN(cfg.MaxInFlight) // every slot eager in one plan of six, on average
	const submitters, each = 6, 40
	weights := make([]int, submitters*each)
	flushFor := make([]time.Duration, len(weights))
	for i := range weights {
		weights[i] = 1 + rng.IntN(6)
		flushFor[i] = time.Duration(rng.IntN(6)) * time.Millisecond
	}
	pauses := make([][each]time.Duration, submitters)
	for s := range pauses {
		for j := range each {
			pauses[s][j] = time.Duration(rng.IntN(4)) * time.Millisecond
		}
	}
	var h simFlushes
	c := batch.NewCoalescer(cfg, func(id int) int { return weights[id] }, func(b []int) {
		sum := 0
		for _, id := range b {
			sum += weights[id]
		}
		backlog := len(b) >= min(cfg.BacklogItems, cfg.MaxItems) || sum >= cfg.MaxBytes
		h.mu.Lock()
		h.batches = append(h.batches, append([]int(nil), b...))
		h.started += len(b)
		h.inFlight++
		h.maxIn = max(h.maxIn, h.inFlight)
		if backlog {
			h.backlogs++
		}
		h.mu.Unlock()
		time.Sleep(flushFor[b[0]])
		h.mu.Lock()
		h.inFlight--
		if backlog {
			h.backlogs--
		}
		h.mu.Unlock()
	})

	// ids are handed out in submission order: the turn is taken (a channel, on which a
	// blocked submitter waits durably) around each Submit. Submitters whose pauses end at
	// the same instant race for it.
	turn := make(chan int, 1)
	turn <- 0
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			for j := range each {
				time.Sleep(pauses[s][j])
				id := <-turn
				assert.NoError(t, c.Submit(context.Background(), id))
				h.mu.Lock()
				h.submitted++
				h.mu.Unlock()
				turn <- id + 1
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(100 * time.Microsecond):
		}
		synctest.Wait()
		// Nothing runs: every flush in flight sleeps, and every submitter sleeps or waits for
		// its turn or for room. So the counts are the Coalescer's own.
		h.mu.Lock()
		waiting := h.submitted - h.started
		require.Falsef(t, waiting > 0 && h.inFlight < cfg.EagerInFlight,
			"%d items wait while %d slots are busy, of %d eager (at %v)", waiting, h.inFlight, cfg.EagerInFlight, time.Now())
		require.Falsef(t, waiting >= cfg.BacklogItems && h.inFlight < cfg.MaxInFlight,
			"a backlog of %d items waits while %d of %d slots are busy (at %v)", waiting, h.inFlight, cfg.MaxInFlight, time.Now())
		// Of the flushes in flight, each started past EagerInFlight (the later ones) took a
		// backlog.
		require.GreaterOrEqualf(t, h.backlogs, h.inFlight-cfg.EagerInFlight,
			"%d flushes in flight, %d eager, but only %d of a backlog (at %v)", h.inFlight, cfg.EagerInFlight, h.backlogs, time.Now())
		h.mu.Unlock()
	}
	c.Close()

	require.LessOrEqual(t, h.maxIn, cfg.MaxInFlight)
	flushed := make([]int, len(weights))
	for _, b := range h.batches {
		require.NotEmpty(t, b)
		require.LessOrEqual(t, len(b), cfg.MaxItems)
		sum := 0
		for k, id := range b {
			if k > 0 {
				require.Equal(t, b[k-1]+1, id, "batch %v is not a run of consecutive submissions", b)
				require.Less(t, sum, cfg.MaxBytes, "batch %v grew past MaxBytes", b)
			}
			sum += weights[id]
			flushed[id]++
		}
	}
	for id, n := range flushed {
		require.Equal(t, 1, n, "item %d flushed %d times", id, n)
	}
}
