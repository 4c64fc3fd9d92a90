package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/inspect"
	leasekeys "github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// openLeases opens an idem store on f's database, as relays' lease store.
func openLeases(t *testing.T, f fixture) *idem.Store {
	t.Helper()
	ctx := context.Background()
	leases, err := idem.Open(ctx, srv.URI, idem.Options{Connection: server.Connection{Database: f.db}, ReapInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, leases.Close(context.Background())) })
	return leases
}

// TestRelaysOfARelay checks `relays` on the leases a running relay holds: the relay as the
// one member, with the number of partitions of its store, and every partition held until a
// lease's end by the server's clock; once the relay stopped, nothing.
func TestRelaysOfARelay(t *testing.T) {
	f := populateNothing(t)
	leases := openLeases(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := relay.New(memstore.New(memstore.Options{Partitions: 3}), func(context.Context, execstore.OutboxEntry) error { return nil },
		relay.Options{Lease: leases, LeaseDuration: time.Minute})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for r.Stats().Partitions < 3 {
		time.Sleep(time.Millisecond)
	}

	text := f.inspect(t, "relays")
	rows := columns(text)
	require.Len(t, rows, 14, text)
	// A minute's lease, renewed every 20 s: remaining is 40 s to 1 m whatever the machine's
	// load, never "now" (lapsed).
	const at, live = `\d{4}-\d\d-\d\dT[\d:.]+Z`, `in ([4-5]\ds|1m)`
	requireRow(t, []string{`relays of lease key execstore/relay/outbox in ` + regexp.QuoteMeta(f.db) + `\.idempotency \(now ` + at + `, server clock\)`}, rows[0])
	requireRow(t, []string{"members: 1, 1 live"}, rows[2])
	requireRow(t, []string{"MEMBER", "HOLDS", "REGISTERED AT", "EXPIRES AT", "REMAINING"}, rows[3])
	requireRow(t, []string{`\S+`, "3 of 3", at, at, live}, rows[4])
	requireRow(t, []string{"partitions: 3, 3 held"}, rows[6])
	requireRow(t, []string{"PARTITION", "HOLDER", "CLAIMED AT", "EXPIRES AT", "REMAINING", "TAKE-OVER"}, rows[7])
	member := rows[4][0]
	for p := range 3 {
		requireRow(t, []string{string(rune('0' + p)), regexp.QuoteMeta(member), at, at, live, "-"}, rows[8+p])
	}
	require.Equal(t, `HOLDER: the member whose claim took the lease; "a relay (unnamed)" for a relay of an earlier version.`, rows[12][0])

	var rep inspect.Relays
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "relays", "-json")), &rep))
	require.Equal(t, "execstore/relay/outbox", rep.LeaseKey)
	require.Equal(t, "server", rep.Clock)
	require.Len(t, rep.Members, 1)
	m := rep.Members[0]
	require.Equal(t, "execstore/relay/outbox/members/"+m.Name, m.Key)
	require.Equal(t, 3, *m.Partitions)
	require.Equal(t, 3, m.Held, "it holds all three")
	require.False(t, m.Lapsed)
	require.InDelta(t, 60, m.RemainingSeconds, 2)
	require.Empty(t, m.Problems)
	require.Len(t, rep.Partitions, 3)
	for p, l := range rep.Partitions {
		require.Equal(t, p, l.Partition)
		require.Equal(t, "execstore/relay/outbox/partitions/"+string(rune('0'+p)), l.Key)
		require.True(t, l.Held, "partition %d", p)
		require.Equal(t, m.Name, l.Holder, "partition %d: held by the one member", p)
		require.False(t, l.Lapsed)
		require.InDelta(t, 60, *l.RemainingSeconds, 2)
		require.Empty(t, l.Problems)
	}

	// A sweeper's lease key holds nothing here.
	require.Contains(t, f.inspect(t, "relays", "-lease-key", "execstore/relay/timers"),
		"\nnone: no relay registered and no lease held under this lease key\n")

	// Stopped, the relay released its leases and its registration.
	require.NoError(t, r.Close(ctx))
	require.NoError(t, <-done)
	require.Regexp(t, `^relays of lease key execstore/relay/outbox in `+regexp.QuoteMeta(f.db)+`\.idempotency \(now `+at+`, server clock\)\n\n`+
		`none: no relay registered and no lease held under this lease key\n$`, f.inspect(t, "relays"))
	require.JSONEq(t, `{"lease_key": "execstore/relay/outbox", "source": "`+f.db+`.idempotency", "now": "TIME", "clock": "server", "members": [], "partitions": []}`,
		normalised(f.inspect(t, "relays", "-json")))

	// A sweeper registered: its leases follow the relays' in text, not in -json nor under
	// a lease key asked for.
	_, err := leases.Claim(ctx, leasekeys.MemberKey(leasekeys.SweeperKey, "sweeper-1"), leasekeys.MemberFingerprint(3), 1, time.Minute)
	require.NoError(t, err)
	text = f.inspect(t, "relays")
	require.Regexp(t, `none: no relay registered and no lease held under this lease key\n\n`+
		`relays of lease key execstore/relay/timers in `+regexp.QuoteMeta(f.db)+`\.idempotency`, text)
	require.Contains(t, text, "sweeper-1")
	require.NotContains(t, f.inspect(t, "relays", "-lease-key", "execstore/relay/outbox"), "sweeper-1")
	require.NotContains(t, f.inspect(t, "relays", "-json"), "sweeper-1")
}

// TestRelaysLeases checks `relays` on leases taken through the lease store as relays take
// them, under a lease key of their own: a live member and a lapsed one; a partition held, one
// whose lease lapsed, one taken over after its lease lapsed, and one nobody holds; and no
// claim token anywhere.
func TestRelaysLeases(t *testing.T) {
	f := populateNothing(t)
	leases := openLeases(t, f)
	ctx := context.Background()
	const key = "shop/relays"
	var tokens []string
	claim := func(k, fingerprint string, d time.Duration) idem.Claim {
		holder := ""
		if k != "partitions/0" { // partition 0: a relay of an earlier version, which names none
			holder = "relay-a"
		}
		c, err := leases.ClaimAs(ctx, key+"/"+k, fingerprint, 1, d, holder)
		require.NoError(t, err)
		require.True(t, c.Held(), k)
		tokens = append(tokens, c.Token)
		return c
	}
	waitLapsed := func(k string) {
		for {
			rec, err := leases.Get(ctx, key+"/"+k)
			require.NoError(t, err)
			if rec.Lapsed {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	claim("members/relay-a", "execstore/relay/lease/member/partitions=4", time.Hour)
	claim("members/relay-b", "execstore/relay/lease/member/partitions=4", time.Millisecond)
	claim("partitions/0", "execstore/relay/lease", time.Hour)
	claim("partitions/1", "execstore/relay/lease", time.Millisecond)
	claim("partitions/2", "execstore/relay/lease", time.Millisecond)
	waitLapsed("partitions/2")
	waitLapsed("partitions/1")
	waitLapsed("members/relay-b")
	retaken := claim("partitions/2", "execstore/relay/lease", time.Hour)
	require.Equal(t, idem.LeaseReclaimed, retaken.Outcome)

	text := f.inspect(t, "relays", "-lease-key", key)
	rows := columns(text)
	require.Len(t, rows, 16, text)
	const at, live, ago = `\d{4}-\d\d-\d\dT[\d:.]+Z`, `in (59m\d+s|1h)`, `now|\d+s ago`
	requireRow(t, []string{"members: 2, 1 live"}, rows[2])
	requireRow(t, []string{"relay-a", "1 of 4", at, at, live}, rows[4])
	requireRow(t, []string{"relay-b", "0 of 4", at, at, `(` + ago + `) \(lapsed\)`}, rows[5])
	requireRow(t, []string{"partitions: 4, 2 held"}, rows[7])
	takeOver := "yes" // idem records a take-over in the lease on either formulation
	requireRow(t, []string{"0", `a relay \(unnamed\)`, at, at, live, "-"}, rows[9])
	requireRow(t, []string{"1", `nobody \(lapsed: relay-a\)`, at, at, ago, "-"}, rows[10])
	requireRow(t, []string{"2", "relay-a", at, at, live, takeOver}, rows[11])
	requireRow(t, []string{"3", "nobody", "-", "-", "-", "-"}, rows[12])
	requireRow(t, []string{`TAKE-OVER: yes where the lease's claim took over a lapsed one \(another relay's, or the holder's own\)\.`}, rows[15])

	js := f.inspect(t, "relays", "-lease-key", key, "-json")
	for _, token := range tokens {
		require.NotContains(t, text, token)
		require.NotContains(t, js, token)
	}
	var rep inspect.Relays
	require.NoError(t, json.Unmarshal([]byte(js), &rep))
	require.Len(t, rep.Members, 2)
	require.True(t, rep.Members[1].Lapsed)
	require.Negative(t, rep.Members[1].RemainingSeconds)
	require.Equal(t, 1, rep.Members[0].Held, "relay-a holds partition 2 alone: 0 was claimed with no holder, 1 lapsed")
	require.Zero(t, rep.Members[1].Held)
	require.Len(t, rep.Partitions, 4)
	p1, p3 := rep.Partitions[1], rep.Partitions[3]
	require.False(t, p1.Held)
	require.True(t, p1.Lapsed)
	require.LessOrEqual(t, *p1.RemainingSeconds, 0.0)
	require.True(t, rep.Partitions[2].TakenOver)
	require.Empty(t, rep.Partitions[0].Holder, "claimed with no holder")
	require.Equal(t, "relay-a", p1.Holder, "a lapsed lease still names its last holder")
	require.Equal(t, "relay-a", rep.Partitions[2].Holder)
	require.Regexp(t, `\nholder +relay-a\n`, f.inspect(t, "idem", "get", key+"/partitions/2"), "idem get names the holder")
	require.NotContains(t, f.inspect(t, "idem", "get", key+"/partitions/0"), "holder", "none named")
	require.JSONEq(t, `{"partition": 3, "key": "shop/relays/partitions/3", "held": false, "lapsed": false,
		"taken_over": false, "problems": []}`, string(must(json.Marshal(p3))))

	// A key under the lease key that is neither a member nor a partition is no relay's; a
	// completed record under a partition's key is no lease.
	claim("partitionsX", "execstore/relay/lease", time.Hour)
	c := claim("partitions/9", "execstore/relay/lease", time.Hour)
	ok, err := leases.Complete(ctx, key+"/partitions/9", c.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	rep = inspect.Relays{}
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "relays", "-lease-key", key, "-json")), &rep))
	require.Len(t, rep.Members, 2)
	require.Len(t, rep.Partitions, 5)
	p9 := rep.Partitions[4]
	require.Equal(t, 9, p9.Partition)
	require.False(t, p9.Held)
	require.Equal(t, []string{"state: COMPLETED, not a lease"}, p9.Problems)
	text = f.inspect(t, "relays", "-lease-key", key)
	require.Contains(t, text, "partitions: 5, 2 held\n")
	require.Regexp(t, `\n  9 +not a relay's lease +`, text)
	require.Contains(t, text, "\nproblem: shop/relays/partitions/9: state: COMPLETED, not a lease\n")
}

// must returns v, for a call whose error cannot happen.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// `relays` finds the leases where relays keep them: an idem store in the database named
// after -db with "_leases" appended (the relay docs' example), or aio's Store.LeaseStore
// there, and says where it read them; -collection names the lease store in -db instead.
func TestRelaysFoundInTheirOwnDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, coll := range []string{"idempotency", "executions"} {
		t.Run(coll, func(t *testing.T) {
			f := populateNothing(t)
			leases, err := idem.Open(ctx, srv.URI, idem.Options{Connection: server.Connection{Database: f.db + "_leases", Collection: coll}, ReapInterval: -1})
			require.NoError(t, err)
			t.Cleanup(func() {
				require.NoError(t, leases.Close(context.Background()))
				_ = testserver.Collection(t, srv.URI, f.db+"_leases", coll).Database().Drop(context.Background())
			})
			r := relay.New(memstore.New(memstore.Options{Partitions: 2}), func(context.Context, execstore.OutboxEntry) error { return nil },
				relay.Options{Lease: leases, LeaseDuration: time.Minute, Name: "eu-1"})
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			for r.Stats().Partitions < 2 {
				time.Sleep(time.Millisecond)
			}
			text := f.inspect(t, "relays")
			assert.Contains(t, text, " in "+f.db+"_leases."+coll+" (now ")
			assert.Contains(t, text, "members: 1, 1 live")
			assert.Regexp(t, `eu-1-[0-9a-f]{16} +2 of 2 `, text)
			assert.Contains(t, f.inspect(t, "relays", "-collection", "idempotency"), "\nnone: no relay registered",
				"-collection names the lease store in -db")
			require.NoError(t, r.Close(ctx))
			require.NoError(t, <-done)
		})
	}
}
