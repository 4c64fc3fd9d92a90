package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/leases"
)

// The lease keys of a Relay and of a Sweeper by default (relay.Options.LeaseKey).
const (
	RelayLeaseKey   = leases.RelayKey
	SweeperLeaseKey = leases.SweeperKey
)

// idemPrevState is the state a claim took the record over from, which idem records
// (idem/record.go): CLAIMED when the claim took over a lapsed lease.
const idemPrevState = "prev_state"

// idemHolder is the name the claim that took the record gave its claimer (idem's
// Record.Holder): a relay's member name.
const idemHolder = "holder"

// Relays are the relays of a lease key: the members registered and the partitions'
// leases, judged by the server's clock.
type Relays struct {
	LeaseKey string `json:"lease_key"`
	// Source is the collection the leases were read from, "database.collection".
	Source     string           `json:"source"`
	Now        string           `json:"now"`
	Clock      string           `json:"clock"` // "server" ($$NOW or hello's localTime), or "local"
	Members    []RelayMember    `json:"members"`
	Partitions []PartitionLease `json:"partitions"`
}

// RelayMember is one relay registered under the lease key: its member lease.
type RelayMember struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Partitions is the number of partitions the relay divides the store into, as its
	// registration names it; absent when it names none (a relay of an earlier version).
	Partitions       *int    `json:"partitions,omitempty"`
	RegisteredAt     string  `json:"registered_at,omitempty"` // when the member lease was claimed
	ExpiresAt        string  `json:"expires_at,omitempty"`    // the lease's end, by the server's clock
	RemainingSeconds float64 `json:"remaining_seconds"`       // until ExpiresAt; negative once lapsed
	// Lapsed: the relay did not renew its registration in time; the other relays leave it
	// out of the share.
	Lapsed bool `json:"lapsed"`
	// Held is the number of partitions whose live lease this member holds (its share of
	// Partitions, not all of them).
	Held     int      `json:"held"`
	Problems []string `json:"problems"`
}

// PartitionLease is the lease of one partition, or its absence.
type PartitionLease struct {
	Partition int    `json:"partition"`
	Key       string `json:"key"`
	// Held: a relay holds the partition under a live lease.
	Held bool `json:"held"`
	// Holder is the member name of the relay whose claim took the lease (idem's
	// Record.Holder), live or lapsed; absent when the claim named none (a relay of an
	// earlier version) or there is no lease.
	Holder string `json:"holder,omitempty"`
	// Lapsed: the lease's end has passed; nobody holds the partition until the next claim.
	// Neither Held nor Lapsed: there is no lease (never claimed, or released).
	Lapsed           bool     `json:"lapsed"`
	ClaimedAt        string   `json:"claimed_at,omitempty"`
	ExpiresAt        string   `json:"expires_at,omitempty"`
	RemainingSeconds *float64 `json:"remaining_seconds,omitempty"` // absent without a lease
	// TakenOver: the lease's claim took it over from a claim whose lease had lapsed (another
	// relay's, or the holder's own), as idem records it (prev_state, by either formulation;
	// a lease taken over by a version of idem that did not record it on FerretDB shows false).
	TakenOver bool     `json:"taken_over"`
	Problems  []string `json:"problems"`
}

// ReadRelays reads the relays sharing leaseKey's partitions in their lease store's
// collection coll (an idem store's): the server's clock (local when it gives none), then one
// find of the lease key's records on the _id index. The claim tokens, header values and
// bodies are left out of the read.
func ReadRelays(ctx context.Context, coll *mongo.Collection, leaseKey string, local time.Time) (*Relays, error) {
	now, clock := ServerNow(ctx, coll.Database(), local)
	return readRelaysAt(ctx, coll, leaseKey, now, clock)
}

// readRelaysAt is ReadRelays with the server's clock read: now, by clock.
func readRelaysAt(ctx context.Context, coll *mongo.Collection, leaseKey string, now time.Time, clock string) (*Relays, error) {
	cur, err := coll.Find(ctx, bson.D{{Key: idField, Value: prefixRange(leaseKey)}}, options.Find().
		SetProjection(bson.D{{Key: idemToken, Value: 0}, {Key: idemHeaders, Value: 0}, {Key: idemBody, Value: 0}}).
		SetSort(bson.D{{Key: idField, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("reading the leases of %q in %s.%s: %w", leaseKey, coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &Relays{LeaseKey: leaseKey, Source: coll.Database().Name() + "." + coll.Name(), Now: FormatTime(now), Clock: clock,
		Members: []RelayMember{}, Partitions: []PartitionLease{}}
	for cur.Next(ctx) {
		key, _ := cur.Current.Lookup(idField).StringValueOK()
		if name, ok := strings.CutPrefix(key, leases.MembersPrefix(leaseKey)); ok && name != "" {
			r.Members = append(r.Members, readMember(cur.Current, key, name, now))
		} else if p, ok := partitionOf(key, leaseKey); ok {
			r.Partitions = append(r.Partitions, readPartitionLease(cur.Current, key, p, now))
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("reading the leases of %q in %s.%s: %w", leaseKey, coll.Database().Name(), coll.Name(), err)
	}
	r.Partitions = withUnheld(r.Partitions, r.Members, leaseKey)
	for i := range r.Members {
		for _, l := range r.Partitions {
			if l.Held && l.Holder == r.Members[i].Name {
				r.Members[i].Held++
			}
		}
	}
	return r, nil
}

// LeaseStores are where relays keep their leases, in the order ReadRelaysIn looks: the idem
// store idempotency in db (the relays' Options.Lease on the store's database), then in
// db+"_leases" (the database of their own the relay docs recommend), then the collection
// executions in db+"_leases" (aio.Store.LeaseStore's).
func LeaseStores(db *mongo.Database, idempotency, executions string) []*mongo.Collection {
	own := db.Client().Database(db.Name() + "_leases")
	return []*mongo.Collection{db.Collection(idempotency), own.Collection(idempotency), own.Collection(executions)}
}

// ReadRelaysIn reads the relays of leaseKey (ReadRelays) from the first of colls that holds
// a record under it, reading them in order; from the first when none does. It reads the
// server's clock once, over the first's database, for all of them (the same server).
func ReadRelaysIn(ctx context.Context, colls []*mongo.Collection, leaseKey string, local time.Time) (*Relays, error) {
	if len(colls) == 0 {
		return nil, nil
	}
	now, clock := ServerNow(ctx, colls[0].Database(), local)
	var first *Relays
	for _, coll := range colls {
		r, err := readRelaysAt(ctx, coll, leaseKey, now, clock)
		if err != nil {
			return nil, err
		}
		if len(r.Members)+len(r.Partitions) > 0 {
			return r, nil
		}
		if first == nil {
			first = r
		}
	}
	return first, nil
}

// partitionOf is the partition whose lease key is key: p for LeaseKey/partitions/<p>, 0 for
// the one lease of a store that is not partitioned.
func partitionOf(key, leaseKey string) (int, bool) {
	if key == leaseKey {
		return 0, true
	}
	return leases.PartitionOfKey(leaseKey, key)
}

// partitionKey is the lease key of partition p of a store of n partitions.
func partitionKey(leaseKey string, p, n int) string {
	if n <= 1 {
		return leaseKey
	}
	return leases.PartitionKey(leaseKey, p)
}

// readMember reads the member lease of the relay name.
func readMember(doc bson.Raw, key, name string, now time.Time) RelayMember {
	rec := readIdem(doc, key, now, "", false)
	m := RelayMember{Name: name, Key: key, RegisteredAt: rec.ClaimedAt, ExpiresAt: rec.Until, Lapsed: rec.Lapsed,
		Problems: leaseProblems(rec)}
	if parts, ok := leases.PartitionsOfMember(rec.Fingerprint); ok {
		m.Partitions = &parts
	}
	if until, err := time.Parse(time.RFC3339Nano, rec.Until); err == nil {
		m.RemainingSeconds = seconds(until.Sub(now))
	}
	return m
}

// readPartitionLease reads the lease of partition p.
func readPartitionLease(doc bson.Raw, key string, p int, now time.Time) PartitionLease {
	rec := readIdem(doc, key, now, "", false)
	l := PartitionLease{Partition: p, Key: key, Lapsed: rec.Lapsed, ClaimedAt: rec.ClaimedAt, ExpiresAt: rec.Until,
		Problems: leaseProblems(rec)}
	if rec.Fingerprint != "" && rec.Fingerprint != leases.Fingerprint {
		l.Problems = append(l.Problems, fmt.Sprintf("%s: %q is not a relay's", idemFingerprint, rec.Fingerprint))
	}
	l.Held = !l.Lapsed && len(l.Problems) == 0
	if until, err := time.Parse(time.RFC3339Nano, rec.Until); err == nil {
		s := seconds(until.Sub(now))
		l.RemainingSeconds = &s
	}
	prev, _ := doc.Lookup(idemPrevState).StringValueOK()
	l.TakenOver = prev == IdemClaimed
	if len(l.Problems) == 0 {
		l.Holder = rec.Holder
	}
	return l
}

// leaseProblems are what makes rec no relay's lease: the fields idem cannot read (it takes
// such a record as absent, and the next claim takes it over), or a completed record.
func leaseProblems(rec *IdemRecord) []string {
	problems := rec.Problems
	if rec.State == IdemCompleted {
		problems = append(problems, idemState+": "+IdemCompleted+", not a lease")
	}
	return problems
}

// withUnheld adds to leases the partitions the members divide the store into that have no
// lease, and sorts them by partition. The number of partitions is the largest a live member
// names, or any member when none is live.
func withUnheld(leases []PartitionLease, members []RelayMember, leaseKey string) []PartitionLease {
	n := 0
	for _, live := range []bool{true, false} {
		for _, m := range members {
			if m.Partitions != nil && m.Lapsed != live {
				n = max(n, *m.Partitions)
			}
		}
		if n > 0 {
			break
		}
	}
	for p := range n {
		key := partitionKey(leaseKey, p, n)
		if !slices.ContainsFunc(leases, func(l PartitionLease) bool { return l.Key == key }) {
			leases = append(leases, PartitionLease{Partition: p, Key: key, Problems: []string{}})
		}
	}
	slices.SortFunc(leases, func(a, b PartitionLease) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), strings.Compare(a.Key, b.Key))
	})
	return leases
}
