package idem

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Held is a claim its holder keeps: its key, and the token its Claim handed out.
type Held struct {
	Key, Token string
}

// RenewAll renews each of claims as Renew does, in one bulk write: renewed[i] reports
// whether claims[i] was renewed (false: it was fenced or completed). When the write matches
// fewer claims than it holds, each claim is renewed again alone, to tell which were fenced
// (renewing twice is harmless). A bad token or lease is execstore.ErrInvalid before any
// I/O. When the bulk write is unanswered, the error matches execstore.ErrOutcomeUnknown for
// every claim.
//
// Cost: one update command for all the claims, plus one per claim when some were fenced.
func (s *Store) RenewAll(ctx context.Context, claims []Held, lease time.Duration) ([]bool, error) {
	for _, c := range claims {
		if err := validateToken(c.Key, c.Token); err != nil {
			return nil, err
		}
	}
	if err := validateDuration("lease", lease); err != nil {
		return nil, err
	}
	renewed := make([]bool, len(claims))
	if len(claims) == 0 {
		return renewed, nil
	}
	matched, err := submit(ctx, s, opRenew, claims[0].Key, func(ctx context.Context) (int64, error) {
		return s.form.renewAll(ctx, claims, lease)
	})
	if err != nil {
		return nil, err
	}
	if matched == int64(len(claims)) {
		for i := range renewed {
			renewed[i] = true
		}
		return renewed, nil
	}
	for i, c := range claims {
		if renewed[i], err = s.Renew(ctx, c.Key, c.Token, lease); err != nil {
			return nil, err
		}
	}
	return renewed, nil
}

// renewModels are the bulk write's statements, one guarded update per claim, in key order:
// the global order of statements, so that two holders' bulk renewals on a row-locking engine
// never wait on each other in a cycle.
func renewModels(claims []Held, update any) []mongo.WriteModel {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b Held) int { return strings.Compare(a.Key, b.Key) })
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
	res, err := f.coll.BulkWrite(ctx, renewModels(claims, update), options.BulkWrite().SetOrdered(false))
	if err != nil {
		werr, _ := writeFailure(ctx, "renew", claims[0].Key, err)
		return 0, werr
	}
	return res.MatchedCount, nil
}
