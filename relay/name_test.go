package relay_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// Options.Name is the readable part of a relay's member: the leases it holds are held under
// Name and a random part, and two relays given one name are two members. A Name that would
// make the lease keys ambiguous is refused before any call. In a synctest bubble: the relays
// and their leases are in memory.
func TestNamedMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		leases := memstore.NewLeases(memstore.LeasesOptions{})
		held := make(chan relay.PartitionEvent, 2*execstore.MaxPartitions)
		opts := relay.Options{Lease: leases, Name: "payments-1", OnPartition: func(e relay.PartitionEvent) {
			if e.Held {
				held <- e
			}
		}}
		a, b := relay.New(store, ack, opts), relay.New(store, ack, opts)
		member := regexp.MustCompile(`^payments-1-[0-9a-f]{16}$`)
		assert.Regexp(t, member, a.Member())
		assert.Regexp(t, member, b.Member())
		assert.NotEqual(t, a.Member(), b.Member(), "one name, two members")
		sweeper := relay.NewSweeper(store, func(context.Context, execstore.DueTimer) error { return nil }, relay.Options{Name: "payments-1"})
		assert.Regexp(t, member, sweeper.Member())

		stopA, stopB := run(t, a), run(t, b)
		select {
		case <-held:
		case <-time.After(waitLong):
			t.Fatalf("no partition taken within %v", waitLong)
		}
		recs, err := leases.List(bg, "execstore/relay/outbox/", 0)
		require.NoError(t, err)
		holders := map[string]bool{}
		for _, rec := range recs {
			holders[rec.Holder] = true
		}
		require.NotEmpty(t, holders)
		for h := range holders {
			assert.Contains(t, []string{a.Member(), b.Member()}, h, "every lease is held under a named member")
		}
		require.NoError(t, stopA())
		require.NoError(t, stopB())

		for _, name := range []string{"a/b", "nul\x00", "\xff", strings.Repeat("n", relay.MaxNameBytes+1)} {
			leases := &countedLeases{Leases: memstore.NewLeases(memstore.LeasesOptions{})}
			for _, r := range []runner{relay.New(store, ack, relay.Options{Name: name}), newRunner(true, store, relay.Options{Name: name, Lease: leases})} {
				ctx, cancel := context.WithTimeout(bg, waitLong)
				err := r.Run(ctx)
				cancel()
				assert.ErrorIs(t, err, execstore.ErrInvalid, "%q", name)
				var ie *execstore.InvalidError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, "Options.Name", ie.Field)
			}
			assert.Zero(t, leases.calls.Load(), "no call reached the lease store")
		}
		ok := strings.Repeat("n", relay.MaxNameBytes)
		assert.Regexp(t, "^"+ok+"-[0-9a-f]{16}$", relay.New(store, ack, relay.Options{Name: ok}).Member())
	})
}

func ack(context.Context, execstore.OutboxEntry) error { return nil }
