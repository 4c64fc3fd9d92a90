package relay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// countedLeases counts the calls that reach its Leases.
type countedLeases struct {
	relay.Leases
	calls atomic.Int64
}

func (c *countedLeases) ClaimAs(ctx context.Context, key, fingerprint string, version int, lease time.Duration, holder string) (idem.Claim, error) {
	c.calls.Add(1)
	return c.Leases.ClaimAs(ctx, key, fingerprint, version, lease, holder)
}

func (c *countedLeases) Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error) {
	c.calls.Add(1)
	return c.Leases.Complete(ctx, key, token, resp, retention)
}

func (c *countedLeases) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	c.calls.Add(1)
	return c.Leases.RenewAll(ctx, claims, lease)
}

func (c *countedLeases) Release(ctx context.Context, key, token string) (bool, error) {
	c.calls.Add(1)
	return c.Leases.Release(ctx, key, token)
}

func (c *countedLeases) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	c.calls.Add(1)
	return c.Leases.List(ctx, prefix, limit)
}

// runner is a Relay or a Sweeper.
type runner interface {
	Run(ctx context.Context) error
	Close(ctx context.Context) error
}

// newRunner returns a Relay or a Sweeper of store with opts, whose handlers ack everything.
func newRunner(sweeper bool, store execstore.Store, opts relay.Options) runner {
	if sweeper {
		return relay.NewSweeper(store, func(context.Context, execstore.DueTimer) error { return nil }, opts)
	}
	return relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
}

// A LeaseKey whose keys may be keys of idem's client namespace is refused: Run returns an
// *Error matching execstore.ErrInvalid that names Options.LeaseKey, and no call reaches the
// lease store. A key beside the namespace is taken.
func TestLeaseKeyInClientNamespaceRefused(t *testing.T) {
	store := newMemstore(t)
	for name, sweeper := range map[string]bool{"relay": false, "sweeper": true} {
		for _, key := range []string{"client", "client/", "client/outbox", idem.ClientKey("execstore/relay/outbox")} {
			t.Run(name+"/"+key, func(t *testing.T) {
				leases := &countedLeases{Leases: memstore.NewLeases(memstore.LeasesOptions{})}
				r := newRunner(sweeper, store, relay.Options{Lease: leases, LeaseKey: key})
				ctx, cancel := context.WithTimeout(bg, waitLong)
				defer cancel()
				err := r.Run(ctx)
				assert.ErrorIs(t, err, execstore.ErrInvalid)
				var re *relay.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, relay.OpClaim, re.Op)
				var ie *execstore.InvalidError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, "Options.LeaseKey", ie.Field)
				assert.Zero(t, leases.calls.Load(), "no call reached the lease store")
			})
		}
	}
	for _, key := range []string{"clients", "client-outbox", "my/client/outbox", "Client/outbox"} {
		t.Run("taken/"+key, func(t *testing.T) {
			leases := &countedLeases{Leases: memstore.NewLeases(memstore.LeasesOptions{})}
			held := make(chan relay.PartitionEvent, execstore.MaxPartitions)
			r := newRunner(false, store, relay.Options{Lease: leases, LeaseKey: key, OnPartition: func(e relay.PartitionEvent) {
				if e.Held {
					held <- e
				}
			}})
			stop := run(t, r)
			select {
			case <-held:
			case <-time.After(waitLong):
				t.Fatalf("no partition taken under %q within %v", key, waitLong)
			}
			require.NoError(t, stop())
			assert.Positive(t, leases.calls.Load())
		})
	}
	t.Run("no lease store", func(t *testing.T) {
		r := newRunner(false, store, relay.Options{LeaseKey: "client/outbox"})
		stop := run(t, r)
		require.NoError(t, stop(), "without a lease store the key names no record")
	})
}

// The finding: one idem store serves an HTTP API through its middleware and holds the
// relays' leases. Requests whose Idempotency-Key spells every key a relay and a sweeper of
// the default lease keys use (the lease key, the partitioning record, each partition, the
// relay's own member key) run their handler and stop no relay: each then takes every
// partition of its store, and the relay delivers. On a store that is not partitioned the
// lease key itself is the lease.
func TestRequestsCannotTakeRelayLeases(t *testing.T) {
	for _, view := range []struct {
		name string
		open func(t *testing.T, store execstore.Store) execstore.Store
	}{
		{"partitioned", func(_ *testing.T, store execstore.Store) execstore.Store { return store }},
		{"unpartitioned", unpartitioned},
	} {
		t.Run(view.name, func(t *testing.T) {
			mem := memstore.New(memstore.Options{Partitions: 4})
			t.Cleanup(func() { _ = mem.Close(bg) })
			store := view.open(t, mem)
			parts := 1
			if ps, ok := store.(execstore.Partitioned); ok {
				parts = ps.Partitions()
			}
			leases, _ := openLeases(t, testserver.Database(t, "leasekey"))
			var ran atomic.Int64
			api := httptest.NewServer(leases.Middleware(idem.MiddlewareOptions{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran.Add(1)
				w.WriteHeader(http.StatusCreated)
			})))
			t.Cleanup(api.Close)

			delivered := make(chan string, 1)
			var once sync.Once
			relayHeld, sweeperHeld := &heldCount{}, &heldCount{}
			opts := leaseOptions(leases)
			opts.OnPartition = relayHeld.on
			r := relay.New(store, func(_ context.Context, e execstore.OutboxEntry) error {
				once.Do(func() { delivered <- string(e.Event) })
				return nil
			}, opts)
			opts.OnPartition = sweeperHeld.on
			sw := relay.NewSweeper(store, func(context.Context, execstore.DueTimer) error { return nil }, opts)
			var keys []string
			for lk, member := range map[string]string{"execstore/relay/outbox": r.Member(), "execstore/relay/timers": sw.Member()} {
				keys = append(keys, lk, lk+"/partitioning", lk+"/members/"+member)
				for p := range parts {
					keys = append(keys, lk+"/partitions/"+strconv.Itoa(p))
				}
			}
			for _, key := range keys {
				req, err := http.NewRequest(http.MethodPost, api.URL+"/orders", strings.NewReader("x"))
				require.NoError(t, err)
				req.Header.Set(idem.HeaderKey, strconv.Quote(key))
				resp, err := api.Client().Do(req)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, http.StatusCreated, resp.StatusCode, key)
			}
			assert.Equal(t, int64(len(keys)), ran.Load(), "every request ran")

			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			ended := make(chan error, 2)
			go func() { ended <- r.Run(ctx) }()
			go func() { ended <- sw.Run(ctx) }()
			newEmitter(t, store).emit("src", "dst", "after the requests")
			select {
			case ev := <-delivered:
				assert.Equal(t, "after the requests", ev)
			case err := <-ended:
				cancel()
				t.Fatalf("a relay stopped: %v", err)
			case <-time.After(waitLong):
				t.Fatalf("nothing delivered within %v", waitLong)
			}
			eventually(t, func() bool { return relayHeld.n.Load() == int64(parts) && sweeperHeld.n.Load() == int64(parts) },
				"the relay and the sweeper each take all %d partitions", parts)
			cancel()
			for range 2 {
				select {
				case err := <-ended:
					assert.NoError(t, err, "each ran on until stopped")
				case <-time.After(waitLong):
					t.Fatalf("Run did not return within %v of its context's end", waitLong)
				}
			}
		})
	}
}

// heldCount counts the partitions a relay holds, by its OnPartition events.
type heldCount struct{ n atomic.Int64 }

func (h *heldCount) on(e relay.PartitionEvent) {
	if e.Held {
		h.n.Add(1)
	} else {
		h.n.Add(-1)
	}
}
