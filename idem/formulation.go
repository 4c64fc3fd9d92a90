package idem

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/outcome"
)

// formulation is how the store's writes are put to one kind of server: mongoForm with
// server-side $$NOW pipelines on MongoDB, ferretForm with the estimated server clock and
// guarded writes on FerretDB. Release and the settling reads are the same on both (the
// records type below).
type formulation interface {
	// claim claims key for c, whose token the caller chose before anything is sent.
	claim(ctx context.Context, key string, c claimant, lease time.Duration) (Claim, error)
	complete(ctx context.Context, key, token string, resp Response, retention time.Duration) (bool, error)
	renew(ctx context.Context, key, token string, lease time.Duration) (bool, error)
	// renewAll renews every claim as renew does, in one bulk write, and returns how many
	// it matched.
	renewAll(ctx context.Context, claims []Held, lease time.Duration) (int64, error)
	// get returns the record by the server's clock: nil when absent, unreadable or
	// completed past its retention.
	get(ctx context.Context, key string) (*Record, error)
	// list returns the records whose key starts with prefix, in key order, by the server's
	// clock as get does.
	list(ctx context.Context, prefix string, limit int) ([]Record, error)
	// ensureIndexes prepares the collection at Open.
	ensureIndexes(ctx context.Context) error
}

// claimant is who claims a key, as a claim writes it: the request's fingerprint and its
// version, the claim's token, and the holder's name (empty for none).
type claimant struct {
	fingerprint string
	version     int
	token       string
	holder      string
}

// records is what both formulations share: the collection and the writes and reads that
// need no clock.
type records struct {
	coll *mongo.Collection
	// primary is coll read at the primary's latest state (local read concern, primary read
	// preference) whatever the URI says: the reads that settle a write, or decide the next
	// write, must see every write the primary applied. nil means coll.
	primary *mongo.Collection
	settle  time.Duration // bounds a settling read
	grace   time.Duration
}

// newRecords returns the records of coll, with its primary reads.
func newRecords(coll *mongo.Collection, settle, grace time.Duration) records {
	return records{coll: coll, primary: opsrun.PrimaryReads(coll), settle: settle, grace: grace}
}

// heldFilter matches key's record while it is claimed with token: the guard of complete,
// renew and release.
func heldFilter(key, token string) bson.D {
	return bson.D{{Key: "_id", Value: key}, {Key: fState, Value: string(Claimed)}, {Key: fToken, Value: token}}
}

// release deletes key's record if it is claimed with token. It is not settled when
// unanswered: an absent record proves nothing (the next claimer may have come and gone).
func (r *records) release(ctx context.Context, key, token string) (bool, error) {
	res, err := r.coll.DeleteOne(ctx, heldFilter(key, token))
	if err != nil {
		return false, outcome.WriteFailureOf(outcome.NounIdempotencyKey, "release", key, err)
	}
	return res.DeletedCount == 1, nil
}

// findRaw returns key's stored document, or nil, read with the store's read settings.
func (r *records) findRaw(ctx context.Context, key string) (bson.Raw, error) {
	return findRawIn(ctx, r.coll, key)
}

// findPrimary returns key's stored document, or nil, as the primary has it now: the read that
// settles a write, or that a guarded write is built on.
func (r *records) findPrimary(ctx context.Context, key string) (bson.Raw, error) {
	coll := r.primary
	if coll == nil {
		coll = r.coll
	}
	return findRawIn(ctx, coll, key)
}

func findRawIn(ctx context.Context, coll *mongo.Collection, key string) (bson.Raw, error) {
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, outcome.ReadFailureOf(outcome.NounIdempotencyKey, "read", key, err)
	}
	return raw, nil
}

// writeFailure is the error of a write of key that failed with err, and whether it went
// unanswered (so may have been applied) and may be settled by reading the record back:
// only when ctx, the caller's, has not ended, and never after a write-concern error. Such a
// write ran on the primary and may still be rolled back by a failover, so a read that finds
// it proves nothing durable: it stays execstore.ErrOutcomeUnknown, as a group commit's does.
func writeFailure(ctx context.Context, op, key string, err error) (error, bool) {
	werr := outcome.WriteFailureOf(outcome.NounIdempotencyKey, op, key, err)
	return werr, errors.Is(werr, execstore.ErrOutcomeUnknown) && ctx.Err() == nil &&
		outcome.Classify(err) != outcome.NotDurable
}

// readBack reads key's record after an unanswered write, within the settle bound; nil when
// it cannot be read or decoded.
func (r *records) readBack(ctx context.Context, key string) *Record {
	ctx, cancel := context.WithTimeout(ctx, r.settle)
	defer cancel()
	raw, err := r.findPrimary(ctx, key)
	if err != nil || raw == nil {
		return nil
	}
	rec, ok := decodeRecord(raw)
	if !ok {
		return nil
	}
	return rec
}

// settleClaim settles an unanswered claim with token: the claim is the caller's if the
// record carries its token (tokens are random and never reused, so no one else wrote it).
// Otherwise the outcome stays unknown: the write may still be on its way.
func (r *records) settleClaim(ctx context.Context, key, token string, unknown error, corrupt bool,
	outcomeOf func(*Record) Outcome) (Claim, error) {
	rec := r.readBack(ctx, key)
	if rec == nil || rec.token != token {
		return Claim{}, unknown
	}
	return Claim{Outcome: outcomeOf(rec), Token: token, Record: rec, RecoveredFromCorrupt: corrupt, Settled: true}, nil
}

// completed turns the answer to a complete's guarded update into its result: whether it
// matched, or, when the write went unanswered, what a read settles (settleComplete).
func (r *records) completed(ctx context.Context, key, token string, res *mongo.UpdateResult, err error) (bool, error) {
	if err != nil {
		werr, settle := writeFailure(ctx, "complete", key, err)
		if !settle {
			return false, werr
		}
		return r.settleComplete(ctx, key, token, werr)
	}
	return res.MatchedCount == 1, nil
}

// settleComplete settles an unanswered complete with token: true when the record is
// completed with that token, false when it carries another token (the old one is fenced
// for good: tokens are never reused, so the write can never match). Otherwise unknown.
func (r *records) settleComplete(ctx context.Context, key, token string, unknown error) (bool, error) {
	rec := r.readBack(ctx, key)
	switch {
	case rec == nil:
		return false, unknown
	case rec.token != token:
		return false, nil
	case rec.State == Completed:
		return true, nil
	}
	return false, unknown
}

// corruptGuard matches the unreadable document raw of key for as long as no claim has taken
// it over: by its claim_token exactly when that is a string, else by its absence or its
// BSON type. Every record a claim writes carries a fresh random string token, so once
// anyone took it over the guard matches no more, and of concurrent take-overs one wins.
func corruptGuard(key string, raw bson.Raw) bson.D {
	g := bson.D{{Key: "_id", Value: key}}
	v, err := raw.LookupErr(fToken)
	switch {
	case err != nil:
		return append(g, bson.E{Key: fToken, Value: bson.D{{Key: "$exists", Value: false}}})
	case v.Type == bson.TypeString:
		return append(g, bson.E{Key: fToken, Value: v.StringValue()})
	}
	return append(g, bson.E{Key: fToken, Value: bson.D{{Key: "$type", Value: typeAlias(v.Type)}}})
}

// typeAlias is the server's $type alias of a BSON type. The server's numbers are not the
// driver's type bytes everywhere (MinKey is the byte 0xFF but $type -1), so a filter by type
// names it; a byte that is no BSON type (no stored value has one) is sent as its number.
func typeAlias(t bson.Type) any {
	switch t {
	case bson.TypeDouble:
		return "double"
	case bson.TypeString:
		return "string"
	case bson.TypeEmbeddedDocument:
		return "object"
	case bson.TypeArray:
		return "array"
	case bson.TypeBinary:
		return "binData"
	case bson.TypeUndefined:
		return "undefined"
	case bson.TypeObjectID:
		return "objectId"
	case bson.TypeBoolean:
		return "bool"
	case bson.TypeDateTime:
		return "date"
	case bson.TypeNull:
		return "null"
	case bson.TypeRegex:
		return "regex"
	case bson.TypeDBPointer:
		return "dbPointer"
	case bson.TypeJavaScript:
		return "javascript"
	case bson.TypeSymbol:
		return "symbol"
	case bson.TypeCodeWithScope:
		return "javascriptWithScope"
	case bson.TypeInt32:
		return "int"
	case bson.TypeTimestamp:
		return "timestamp"
	case bson.TypeInt64:
		return "long"
	case bson.TypeDecimal128:
		return "decimal"
	case bson.TypeMinKey:
		return "minKey"
	case bson.TypeMaxKey:
		return "maxKey"
	}
	return int32(t)
}
