package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/unique"
)

// mongoForm is the formulation for MongoDB (and the servers that serve its pipelines, such as
// FerretDB 2.x). Time is $$NOW, the server's clock at the write, so the
// application's clock plays no part. A claim is one findAndModify upsert (never of the _id
// alone: see claimFilter) whose pipeline takes the record if it is missing or lapsed and keeps
// it otherwise, recording the state it took it over from (prev_state) so that new and
// reclaimed are told apart without a second read; complete and renew are pipeline updates
// guarded by {_id, state: CLAIMED, claim_token}; a TTL index on expire_at reaps. The command
// documents are built by the pure functions below, which the tests check field by field.
type mongoForm struct {
	records
}

// Names of the pipeline's scratch fields and variables.
const (
	fTake = "__take" // the claim pipeline's decision, unset in its last stage
	fNow  = "__now"  // the server time a read adds to the record
)

// lit makes v a literal in a pipeline: a string starting with "$" would otherwise be read
// as a field path (a fingerprint or a header may well start with one).
func lit(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }

// afterNow is {$add: [$$NOW, d in ms]}, d rounded up to whole milliseconds (leaseMillis) as
// the FerretDB formulation rounds it.
func afterNow(d time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", leaseMillis(d)}}}
}

// claimFilter is the claim's query: the key, with unique.UpsertFilter's predicate that matches
// every record, so the upsert is never one of the _id alone (the pipeline decides). Two
// claimers of an absent key then have one winner on every engine: on MongoDB the loser's
// insert is refused as a duplicate (the server retries that as an update only for an _id-only
// filter) and on an engine that runs an _id-only upsert as INSERT … ON CONFLICT DO UPDATE the
// extra predicate keeps it on the path that updates a record it finds and inserts only where
// there is none, so a loser is refused with a unique violation or updates the winner's record
// (and keeps it: the lease is live). A refused claimer claims again: the record now exists, and
// a findAndModify of an existing document is atomic everywhere.
func claimFilter(key string) bson.D { return unique.UpsertFilter(key) }

// claimPipeline is the claim's update: take the record (a fresh claim with token) when it
// has no state (missing, or stored without one: see stateless) or when it is readable
// (readableExpr) and its lease_until has passed on the server's clock — a Completed record's
// lease_until is its retention's end — and leave every field as it is otherwise. An
// unreadable record is never taken here: the claim sees it come back unreadable and takes it
// over under corruptGuard, as New with RecoveredFromCorrupt, as the FerretDB formulation
// does whatever its lease says.
func claimPipeline(c claimant, lease, grace time.Duration) bson.A {
	take := bson.D{{Key: "$or", Value: bson.A{
		typeIs("$"+fState, "missing"),
		bson.D{{Key: "$and", Value: bson.A{
			readableExpr(),
			bson.D{{Key: "$lt", Value: bson.A{"$" + fLeaseUntil, "$$NOW"}}},
		}}},
	}}}
	either := func(field string, taken any) bson.E {
		return bson.E{Key: field, Value: bson.D{{Key: "$cond", Value: bson.A{"$" + fTake, taken, "$" + field}}}}
	}
	return bson.A{
		bson.D{{Key: "$set", Value: bson.D{{Key: fTake, Value: take}}}},
		bson.D{{Key: "$set", Value: bson.D{
			// Every right-hand side sees the stage's input, so prev_state is the state
			// before this claim.
			either(fPrevState, "$"+fState),
			either(fState, string(Claimed)),
			either(fFingerprint, lit(c.fingerprint)),
			either(fFPVersion, int64(c.version)),
			either(fToken, c.token),
			either(fHolder, lit(c.holder)),
			either(fClaimedAt, "$$NOW"),
			either(fLeaseUntil, afterNow(lease)),
			either(fExpireAt, afterNow(lease+grace)),
			either(fCompletedAt, nil),
			either(fStatus, nil),
			either(fHeaders, lit(bson.A{})),
			either(fBody, lit(bson.Binary{Data: []byte{}})),
		}}},
		bson.D{{Key: "$unset", Value: fTake}},
	}
}

// typeIs is {$in: [{$type: expr}, types]}: expr's aggregation type is one of types.
func typeIs(expr any, types ...string) bson.D {
	in := make(bson.A, len(types))
	for i, t := range types {
		in[i] = t
	}
	return bson.D{{Key: "$in", Value: bson.A{bson.D{{Key: "$type", Value: expr}}, in}}}
}

// arrayOrEmpty is expr when it is an array, else [] (so that $map never fails on a
// mistyped field).
func arrayOrEmpty(expr string) bson.D {
	return bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isArray", Value: expr}}, expr, bson.A{}}}}
}

// allOf is {$allElementsTrue: [{$map: {input: arrayOrEmpty(input), as, in}}]}.
func allOf(input, as string, in bson.D) bson.D {
	return bson.D{{Key: "$allElementsTrue", Value: bson.A{bson.D{{Key: "$map", Value: bson.D{
		{Key: "input", Value: arrayOrEmpty(input)}, {Key: "as", Value: as}, {Key: "in", Value: in},
	}}}}}}
}

// readableExpr is decodeRecord as an aggregation expression over the stored record: true
// when every field decodeRecord needs is there with its type (a token of 32 characters, a
// known state, and for a Completed record its response: a date, a status, a binary body and
// headers of names with string values, where present). The claim pipeline takes over by
// lease only a record for which it is true, so both formulations tell readable records from
// unreadable ones alike.
func readableExpr() bson.D {
	token := "$" + fToken
	header := bson.D{{Key: "$and", Value: bson.A{
		typeIs("$$h", "object"),
		typeIs("$$h."+hName, "string"),
		typeIs("$$h."+hValues, "array"),
		allOf("$$h."+hValues, "x", typeIs("$$x", "string")),
	}}}
	response := bson.D{{Key: "$and", Value: bson.A{
		typeIs("$"+fCompletedAt, "date"),
		typeIs("$"+fStatus, "int", "long"),
		typeIs("$"+fBody, "binData", "missing"),
		typeIs("$"+fHeaders, "array", "missing"),
		allOf("$"+fHeaders, "h", header),
	}}}
	return bson.D{{Key: "$and", Value: bson.A{
		typeIs("$_id", "string"),
		bson.D{{Key: "$in", Value: bson.A{"$" + fState, bson.A{string(Claimed), string(Completed)}}}},
		typeIs("$"+fFingerprint, "string"),
		typeIs("$"+fFPVersion, "int", "long"),
		typeIs(token, "string"),
		bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$strLenBytes", Value: bson.D{{Key: "$cond", Value: bson.A{
			typeIs(token, "string"), token, ""}}}}}, tokenHexLen}}},
		typeIs("$"+fClaimedAt, "date"),
		typeIs("$"+fLeaseUntil, "date"),
		bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "$eq", Value: bson.A{"$" + fState, string(Claimed)}}},
			response,
		}}},
	}}}
}

// takeOverPipeline writes a fresh claim with token over whatever is there: the take-over of
// an unreadable record, under corruptGuard.
func takeOverPipeline(c claimant, lease, grace time.Duration) bson.A {
	return bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: fPrevState, Value: nil},
		{Key: fState, Value: string(Claimed)},
		{Key: fFingerprint, Value: lit(c.fingerprint)},
		{Key: fFPVersion, Value: int64(c.version)},
		{Key: fToken, Value: c.token},
		{Key: fHolder, Value: lit(c.holder)},
		{Key: fClaimedAt, Value: "$$NOW"},
		{Key: fLeaseUntil, Value: afterNow(lease)},
		{Key: fExpireAt, Value: afterNow(lease + grace)},
		{Key: fCompletedAt, Value: nil},
		{Key: fStatus, Value: nil},
		{Key: fHeaders, Value: lit(bson.A{})},
		{Key: fBody, Value: lit(bson.Binary{Data: []byte{}})},
	}}}}
}

// completePipeline completes a claim: the response, and lease_until as the retention's end.
func completePipeline(resp Response, retention, grace time.Duration) bson.A {
	return bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: fState, Value: string(Completed)},
		{Key: fCompletedAt, Value: "$$NOW"},
		{Key: fLeaseUntil, Value: afterNow(retention)},
		{Key: fExpireAt, Value: afterNow(retention + grace)},
		{Key: fStatus, Value: int64(resp.Status)},
		{Key: fHeaders, Value: lit(encodeHeader(resp.Header))},
		{Key: fBody, Value: lit(bson.Binary{Data: nonNil(resp.Body)})},
	}}}}
}

// renewPipeline extends a claim's lease from the server's now.
func renewPipeline(lease, grace time.Duration) bson.A {
	return bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: fLeaseUntil, Value: afterNow(lease)},
		{Key: fExpireAt, Value: afterNow(lease + grace)},
	}}}}
}

// getPipeline reads key's record with the server's now beside it, so that expiry is judged
// by the server's clock.
func getPipeline(key string) bson.A {
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: key}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fNow, Value: "$$NOW"}}}},
	}
}

// ttlIndex reaps a record once its expire_at has passed.
func ttlIndex() mongo.IndexModel {
	return mongo.IndexModel{Keys: bson.D{{Key: fExpireAt, Value: 1}},
		Options: options.Index().SetName("expire_at_ttl").SetExpireAfterSeconds(0)}
}

func (m *mongoForm) claim(ctx context.Context, key string, c claimant, lease time.Duration) (Claim, error) {
	fingerprint, version, token := c.fingerprint, c.version, c.token
	after := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	for range maxClaimRounds {
		raw, err := m.coll.FindOneAndUpdate(ctx, claimFilter(key),
			claimPipeline(c, lease, m.grace), after).Raw()
		if unique.IsDuplicateKey(err) {
			continue // another claimer created the record first: claim the record it made
		}
		if err != nil {
			return m.unanswered(ctx, key, token, err, false)
		}
		if t, _ := raw.Lookup(fToken).StringValueOK(); t == token {
			rec, _ := decodeRecord(raw)
			return Claim{Outcome: outcomeFrom(raw), Token: token, Record: rec}, nil
		}
		if rec, ok := decodeRecord(raw); ok {
			return found(rec, fingerprint, version)
		}
		// Unreadable and not taken (its lease_until is a future date): take it over, unless
		// someone else did first.
		raw, err = m.coll.FindOneAndUpdate(ctx, corruptGuard(key, raw),
			takeOverPipeline(c, lease, m.grace), options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return m.unanswered(ctx, key, token, err, true)
		}
		rec, _ := decodeRecord(raw)
		return Claim{Outcome: New, Token: token, Record: rec, RecoveredFromCorrupt: true}, nil
	}
	return Claim{}, fmt.Errorf("idem: claim of idempotency key %q: the record changed under %d claims in a row", key, maxClaimRounds)
}

// outcomeFrom tells a claim that took a record how it took it, from prev_state.
func outcomeFrom(raw bson.Raw) Outcome {
	if prev, _ := raw.Lookup(fPrevState).StringValueOK(); prev == string(Claimed) {
		return LeaseReclaimed
	}
	return New
}

func (m *mongoForm) unanswered(ctx context.Context, key, token string, err error, corrupt bool) (Claim, error) {
	werr, settle := writeFailure(ctx, "claim", key, err)
	if !settle {
		return Claim{}, werr
	}
	rec := m.readBack(ctx, key)
	if rec == nil || rec.token != token {
		return Claim{}, werr
	}
	out := New
	if raw, rerr := m.findPrimary(ctx, key); rerr == nil && raw != nil {
		out = outcomeFrom(raw)
	}
	return Claim{Outcome: out, Token: token, Record: rec, RecoveredFromCorrupt: corrupt, Settled: true}, nil
}

func (m *mongoForm) complete(ctx context.Context, key, token string, resp Response, retention time.Duration) (bool, error) {
	res, err := m.coll.UpdateOne(ctx, heldFilter(key, token), completePipeline(resp, retention, m.grace))
	return m.completed(ctx, key, token, res, err)
}

func (m *mongoForm) renew(ctx context.Context, key, token string, lease time.Duration) (bool, error) {
	res, err := m.coll.UpdateOne(ctx, heldFilter(key, token), renewPipeline(lease, m.grace))
	if err != nil {
		werr, _ := writeFailure(ctx, "renew", key, err)
		return false, werr
	}
	return res.MatchedCount == 1, nil
}

func (m *mongoForm) get(ctx context.Context, key string) (*Record, error) {
	cur, err := m.coll.Aggregate(ctx, getPipeline(key))
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	if !cur.Next(ctx) {
		return nil, cur.Err()
	}
	now, ok := cur.Current.Lookup(fNow).DateTimeOK()
	if !ok {
		return nil, fmt.Errorf("idem: read of idempotency key %q: the server gave no $$NOW", key)
	}
	return liveRecord(cur.Current, func(u time.Time) bool { return time.UnixMilli(now).After(u) }), nil
}

func (m *mongoForm) ensureIndexes(ctx context.Context) error {
	if _, err := m.coll.Indexes().CreateOne(ctx, ttlIndex()); err != nil {
		return fmt.Errorf("idem: creating the TTL index: %w", err)
	}
	return nil
}
