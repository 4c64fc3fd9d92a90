package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/unique"
)

// ferretForm is the formulation for servers that refuse $$NOW in update pipelines: FerretDB
// 1.x, which has no pipeline updates, $expr or TTL indexes, and DocumentDB (FerretDB 2.x) by
// default. Time is the server's, estimated by serverClock within ε; a claim reads the record
// and writes with a guard on what it read:
//
//   - no record: insert it (a duplicate key means another claimer won: read again);
//   - a live record: AlreadyClaimed or AlreadyCompleted, nothing written;
//   - a lapsed record: replace it, guarded by {_id, state, claim_token, lease_until} as read
//     (a renew, complete or other claim in between changes one of them: read again);
//   - a record without a state: replace it, guarded by corruptGuard, as New (see stateless);
//   - an unreadable record: replace it, guarded by corruptGuard, as New with
//     RecoveredFromCorrupt, whatever its lease says (a lease in an unreadable record proves
//     nothing), as the MongoDB formulation does.
//
// Each write is one single-document command, atomic on the embedded server (its front
// serializes writes), on MongoDB, and on a row-locking engine, which evaluates the guard
// against the row as a concurrent write left it once it holds the row's lock; of concurrent
// claimers exactly one write matches.
//
// Bounds: a lease is written to end at now+ε+lease and counts as lapsed once now−ε is past
// it, where now and ε are the writer's and the reader's own estimates. So a lease is never
// taken over before `lease` has passed on the server's clock since its claim was sent, and
// is taken over at most 2ε_writer+2ε_reader after that (ε is half a hello round trip plus
// 1ms: a few ms on a LAN). The token fences every write anyway: a claim taken over, for
// whatever reason, can no longer complete, renew or release.
type ferretForm struct {
	records
	clock *serverClock
}

// maxClaimRounds bounds the read-and-write rounds of one claim; each round lost means that
// another caller changed the record in between.
const maxClaimRounds = 32

// until is the instant a lease or retention of d started at the estimated server time now
// (error bound eps) ends: the latest the server's clock can read now, rounded up to BSON's
// millisecond, plus d rounded up to whole milliseconds as the MongoDB formulation adds it to
// $$NOW (leaseMillis).
func until(now time.Time, eps, d time.Duration) time.Time {
	start := now.Add(eps)
	if t := start.Truncate(time.Millisecond); !t.Equal(start) {
		start = t.Add(time.Millisecond)
	}
	return start.Add(time.Duration(leaseMillis(d)) * time.Millisecond).UTC()
}

// leaseMillis is d in whole milliseconds, rounded up: a lease or retention is never shorter
// than asked, on either formulation.
func leaseMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// lapsed reports whether until has certainly passed on the server's clock.
func lapsed(until, now time.Time, eps time.Duration) bool {
	return !now.Add(-eps).Before(until)
}

// claimedRecord is the record a claim with token writes at server time now.
func (f *ferretForm) claimedRecord(key string, c claimant, now time.Time, eps, lease time.Duration) (*Record, bson.D) {
	rec := &Record{Key: key, State: Claimed, Fingerprint: c.fingerprint, FingerprintVersion: c.version,
		ClaimedAt: now.Truncate(time.Millisecond).UTC(), Until: until(now, eps, lease), Holder: c.holder, token: c.token}
	return rec, bson.D{
		{Key: "_id", Value: key},
		{Key: fState, Value: string(Claimed)},
		{Key: fFingerprint, Value: c.fingerprint},
		{Key: fFPVersion, Value: int64(c.version)},
		{Key: fToken, Value: c.token},
		{Key: fHolder, Value: c.holder},
		{Key: fClaimedAt, Value: rec.ClaimedAt},
		{Key: fLeaseUntil, Value: rec.Until},
		{Key: fExpireAt, Value: rec.Until.Add(f.grace)},
	}
}

func (f *ferretForm) claim(ctx context.Context, key string, c claimant, lease time.Duration) (Claim, error) {
	fingerprint, version, token := c.fingerprint, c.version, c.token
	// What the last write tried: a round that finds the record carrying token learns that
	// this write landed after all (the driver retried it, say, and the retry lost).
	var tried Outcome
	var triedCorrupt bool
	for range maxClaimRounds {
		now, eps, err := f.clock.current(ctx)
		if err != nil {
			return Claim{}, err
		}
		raw, err := f.findPrimary(ctx, key)
		if err != nil {
			return Claim{}, err
		}
		rec, doc := f.claimedRecord(key, c, now, eps, lease)
		if raw == nil {
			tried, triedCorrupt = New, false
			_, err := f.coll.InsertOne(ctx, doc)
			if unique.IsDuplicateKey(err) {
				continue
			}
			if err != nil {
				return f.unanswered(ctx, key, token, err, false, New)
			}
			return Claim{Outcome: New, Token: token, Record: rec}, nil
		}
		seen, ok := decodeRecord(raw)
		out, guard := New, corruptGuard(key, raw)
		if ok {
			if seen.token == token {
				return Claim{Outcome: tried, Token: token, Record: seen, RecoveredFromCorrupt: triedCorrupt, Settled: true}, nil
			}
			if !lapsed(seen.Until, now, eps) {
				return found(seen, fingerprint, version)
			}
			if seen.State == Claimed {
				out = LeaseReclaimed
			}
			guard = bson.D{{Key: "_id", Value: key}, {Key: fState, Value: string(seen.State)},
				{Key: fToken, Value: seen.token}, {Key: fLeaseUntil, Value: seen.Until}}
		}
		corrupt := !ok && !stateless(raw)
		tried, triedCorrupt = out, corrupt
		if ok { // the state it takes the record over from, as mongoForm's claim records it
			doc = append(doc, bson.E{Key: fPrevState, Value: string(seen.State)})
		}
		res, err := f.coll.ReplaceOne(ctx, guard, doc)
		if err != nil {
			return f.unanswered(ctx, key, token, err, corrupt, out)
		}
		if res.MatchedCount == 1 {
			return Claim{Outcome: out, Token: token, Record: rec, RecoveredFromCorrupt: corrupt}, nil
		}
	}
	return Claim{}, fmt.Errorf("idem: claim of idempotency key %q: the record changed under %d claims in a row", key, maxClaimRounds)
}

// unanswered turns a claim write's failure into the caller's answer, settled by reading
// the token back when it went unanswered.
func (f *ferretForm) unanswered(ctx context.Context, key, token string, err error, corrupt bool, out Outcome) (Claim, error) {
	werr, settle := writeFailure(ctx, "claim", key, err)
	if !settle {
		return Claim{}, werr
	}
	return f.settleClaim(ctx, key, token, werr, corrupt, func(*Record) Outcome { return out })
}

func (f *ferretForm) complete(ctx context.Context, key, token string, resp Response, retention time.Duration) (bool, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return false, err
	}
	end := until(now, eps, retention)
	res, err := f.coll.UpdateOne(ctx, heldFilter(key, token), bson.D{{Key: "$set", Value: bson.D{
		{Key: fState, Value: string(Completed)},
		{Key: fCompletedAt, Value: now.Truncate(time.Millisecond)},
		{Key: fLeaseUntil, Value: end},
		{Key: fExpireAt, Value: end.Add(f.grace)},
		{Key: fStatus, Value: int64(resp.Status)},
		{Key: fHeaders, Value: encodeHeader(resp.Header)},
		{Key: fBody, Value: bson.Binary{Data: nonNil(resp.Body)}},
	}}})
	return f.completed(ctx, key, token, res, err)
}

func (f *ferretForm) renew(ctx context.Context, key, token string, lease time.Duration) (bool, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return false, err
	}
	end := until(now, eps, lease)
	res, err := f.coll.UpdateOne(ctx, heldFilter(key, token), bson.D{{Key: "$set", Value: bson.D{
		{Key: fLeaseUntil, Value: end},
		{Key: fExpireAt, Value: end.Add(f.grace)},
	}}})
	if err != nil {
		werr, _ := writeFailure(ctx, "renew", key, err)
		return false, werr
	}
	return res.MatchedCount == 1, nil
}

func (f *ferretForm) get(ctx context.Context, key string) (*Record, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := f.findRaw(ctx, key)
	if err != nil || raw == nil {
		return nil, err
	}
	return liveRecord(raw, func(u time.Time) bool { return lapsed(u, now, eps) }), nil
}

// liveRecord decodes raw and applies expiry, as isLapsed judges it by the server's clock:
// nil when unreadable or completed past its retention, Lapsed set on a claim past its lease.
func liveRecord(raw bson.Raw, isLapsed func(until time.Time) bool) *Record {
	rec, ok := decodeRecord(raw)
	if !ok {
		return nil
	}
	rec.Lapsed = isLapsed(rec.Until)
	if rec.Lapsed && rec.State == Completed {
		return nil
	}
	return rec
}

func (f *ferretForm) ensureIndexes(context.Context) error { return nil } // no TTL index there: the sweep reaps

// sweep deletes at most limit records whose expire_at has certainly passed by the server's
// clock, and returns how many it deleted. The delete is guarded by expire_at again, so a
// record taken over since the read (a fresh expire_at) stays.
func (f *ferretForm) sweep(ctx context.Context, limit int) (int64, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-eps)
	expired := bson.D{{Key: fExpireAt, Value: bson.D{{Key: "$lt", Value: cutoff}}}}
	cur, err := f.coll.Find(ctx, expired, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return 0, err
	}
	var ids []struct {
		ID any `bson:"_id"`
	}
	if err := cur.All(ctx, &ids); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in := make(bson.A, len(ids))
	for i, d := range ids {
		in[i] = d.ID
	}
	res, err := f.coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}, expired[0]})
	if err != nil {
		return 0, errors.Join(errors.New("idem: sweep"), err)
	}
	return res.DeletedCount, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
