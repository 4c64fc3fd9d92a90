package idem

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/idemcheck"
	"github.com/execstore/execstore/internal/outcome"
)

// Held is a claim its holder keeps: its key, and the token its Claim handed out.
type Held struct {
	Key, Token string
}

// RenewAll renews each of claims as Renew does, in one write: renewed[i] reports
// whether claims[i] was renewed (false: it was fenced or completed). When the write matches
// fewer claims than it holds, one read of their records tells which still hold: a record
// still claimed with the claim's token was renewed by the write (the package doc says why).
// A claim the read finds fenced or completed is false, even when the write renewed it just
// before. A bad token or lease is execstore.ErrInvalid before any I/O. When the write
// is unanswered, the error matches execstore.ErrOutcomeUnknown for every claim. When the read
// fails, RenewAll returns its error: the write may have renewed any of the claims, and
// renewing them again is harmless.
//
// Cost: one update command for all the claims (MongoDB's formulation: a bulk write of one
// guarded update per claim; the FerretDB formulation: one updateMany per 96 claims, whose
// filter names each claim's key with its token), plus, when some were fenced or completed,
// one find of their records per 100 claims, whatever the number fenced: two round trips for
// up to 100 claims. With the
// FerretDB formulation, plus a reading of the server's clock when the last one is stale.
func (s *Store) RenewAll(ctx context.Context, claims []Held, lease time.Duration) ([]bool, error) {
	for _, c := range claims {
		if err := idemcheck.Token(c.Key, c.Token); err != nil {
			return nil, err
		}
	}
	if err := idemcheck.Duration("lease", lease); err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return []bool{}, nil
	}
	return submit(ctx, s, opRenew, claims[0].Key, func(ctx context.Context) ([]bool, error) {
		matched, err := s.form.renewAll(ctx, claims, lease)
		if err != nil {
			return nil, err
		}
		renewed := make([]bool, len(claims))
		if matched == int64(len(claims)) {
			for i := range renewed {
				renewed[i] = true
			}
			return renewed, nil
		}
		if s.afterRenewWrite != nil {
			s.afterRenewWrite()
		}
		tokens, err := s.recs.claimedTokens(ctx, claims)
		if err != nil {
			return nil, err
		}
		for i, c := range claims {
			renewed[i] = tokens[c.Key] == c.Token
		}
		return renewed, nil
	})
}

// claimedTokens returns the token of each of claims' records that is claimed, by key, as
// the primary has them now: one find of the records by _id, projecting only their tokens.
// The find's filter is the bulk write's statements' filters (heldFilter) without their
// tokens, which RenewAll compares: a claim maps to its own token exactly when its record
// matches heldFilter for it (claims write string tokens only).
func (r *records) claimedTokens(ctx context.Context, claims []Held) (map[string]string, error) {
	keys := make([]string, 0, len(claims))
	for _, c := range claims {
		keys = append(keys, c.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	coll := r.primary
	if coll == nil {
		coll = r.coll
	}
	tokens := make(map[string]string, len(keys))
	for chunk := range slices.Chunk(keys, tokenReadChunk) {
		if err := r.readTokens(ctx, coll, chunk, tokens); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// tokenReadChunk bounds the keys of one find of claimedTokens: with a batch of one more, the
// whole answer comes in the find's reply, with no getMore.
const tokenReadChunk = 100

// readTokens adds to tokens the token of each of keys' records that is claimed: one find.
func (r *records) readTokens(ctx context.Context, coll *mongo.Collection, keys []string, tokens map[string]string) error {
	cur, err := coll.Find(ctx,
		bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: fState, Value: string(Claimed)}},
		options.Find().SetProjection(bson.D{{Key: fToken, Value: 1}}).SetBatchSize(int32(len(keys)+1)))
	if err != nil {
		return outcome.ReadFailureOf(outcome.NounIdempotencyKey, "renew", keys[0], err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		key, okKey := cur.Current.Lookup("_id").StringValueOK()
		token, okToken := cur.Current.Lookup(fToken).StringValueOK()
		if okKey && okToken {
			tokens[key] = token
		}
	}
	if err := cur.Err(); err != nil {
		return outcome.ReadFailureOf(outcome.NounIdempotencyKey, "renew", keys[0], err)
	}
	return nil
}

// renewModels are the bulk write's statements, one guarded update per claim, in key order:
// the global order of statements, so that two holders' bulk renewals on a row-locking engine
// never wait on each other in a cycle.
func renewModels(claims []Held, update any) []mongo.WriteModel {
	sorted := sortedClaims(claims)
	models := make([]mongo.WriteModel, len(sorted))
	for i, c := range sorted {
		models[i] = mongo.NewUpdateOneModel().SetFilter(heldFilter(c.Key, c.Token)).SetUpdate(update)
	}
	return models
}

func (m *mongoForm) renewAll(ctx context.Context, claims []Held, lease time.Duration) (int64, error) {
	res, err := m.coll.BulkWrite(ctx, renewModels(claims, renewPipeline(lease, m.grace)), options.BulkWrite().SetOrdered(false))
	if err != nil {
		werr, _ := writeFailure(ctx, "renew", claims[0].Key, err)
		return 0, werr
	}
	return res.MatchedCount, nil
}

func (f *ferretForm) renewAll(ctx context.Context, claims []Held, lease time.Duration) (int64, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return 0, err
	}
	end := until(now, eps, lease)
	update := bson.D{{Key: "$set", Value: bson.D{{Key: fLeaseUntil, Value: end}, {Key: fExpireAt, Value: end.Add(f.grace)}}}}
	var matched int64
	for chunk := range slices.Chunk(sortedClaims(claims), ferretRenewChunk) {
		res, err := f.coll.UpdateMany(ctx, heldAnyFilter(chunk), update)
		if err != nil {
			werr, _ := writeFailure(ctx, "renew", claims[0].Key, err)
			return 0, werr
		}
		matched += res.MatchedCount
	}
	return matched, nil
}

// heldAnyFilter matches each of claims' records that is still claimed with its claim's
// token, as heldFilter does for one: the FerretDB formulation's renewal is one updateMany
// with it. FerretDB 1.x narrows a statement to one record by its _id only when the filter is
// that _id alone, and otherwise reads every record of the collection to evaluate it: one
// statement per claim read the whole collection once per claim, this one reads it once.
// The _id $in lets a server with an _id index read the claims' records alone.
func heldAnyFilter(claims []Held) bson.D {
	keys := make([]string, len(claims))
	each := make(bson.A, len(claims))
	for i, c := range claims {
		keys[i] = c.Key
		each[i] = bson.D{{Key: "_id", Value: c.Key}, {Key: fToken, Value: c.Token}}
	}
	return bson.D{
		{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}},
		{Key: fState, Value: string(Claimed)},
		{Key: "$or", Value: each},
	}
}

// sortedClaims is claims in key order.
func sortedClaims(claims []Held) []Held {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b Held) int { return strings.Compare(a.Key, b.Key) })
	return sorted
}

// ferretRenewChunk bounds the claims of one renewal of the FerretDB formulation.
const ferretRenewChunk = 96
