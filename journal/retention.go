package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
)

// The retention deletes finished invocations (Invocation.Finished) once past a cutoff,
// counted from the receipt that finished them (receipt_at, the server's clock, written by
// Reconcile's own write). Each deletion is one deleteMany whose filter names each invocation
// read with its claim and revision, and the finished condition: an invocation written since
// the read (a checkpoint moved its revision), claimed anew, or changed outside the journal is
// kept. The deletions are counted in a document of the journal's database
// (ops.CountersCollection, _id ops.RetentionID of the journal's collection).

// IndexFinished is the index of the journal's collection that the retention reads:
// {latest, no_replay, receipt_at}, partial on receipt_at being present, so that only the
// invocations whose latest attempt has a receipt are in it. A server without partial
// indexes (FerretDB 1.x) builds it whole. Open creates it.
const IndexFinished = "finished_by_receipt_at"

// finishedIndex is IndexFinished as createIndexes takes it, in the forms to try (partial and
// with composite terms on DocumentDB; whole on FerretDB 1.x, which has no partial indexes).
func finishedIndex() ops.IndexSpec {
	return ops.IndexSpec{Name: IndexFinished,
		Key:     bson.D{{Key: fLatest, Value: 1}, {Key: fNoReplay, Value: 1}, {Key: fReceiptAt, Value: 1}},
		Partial: bson.D{{Key: fReceiptAt, Value: bson.D{{Key: "$exists", Value: true}}}}, CompositeTerms: true}
}

// ensureIndex creates IndexFinished in the first of its forms the server builds; creating
// an existing index changes nothing. One createIndexes per form tried, at the journal's
// write concern.
func ensureIndex(ctx context.Context, coll *mongo.Collection) error {
	forms := finishedIndex().Forms()
	var err error
	for i, form := range forms {
		err = coll.Database().RunCommand(ctx, bson.D{{Key: "createIndexes", Value: coll.Name()},
			{Key: "indexes", Value: bson.A{form}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}}}}).Err()
		if err == nil || !opsrun.IndexOptionRefused(err) || i == len(forms)-1 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("journal: creating index %s on %s: %w", IndexFinished, coll.Name(), err)
	}
	return nil
}

// finishedBy is the condition of an invocation finished at or before cutoff: its latest
// attempt Succeeded, or Failed with no replay, with its receipt time at or before cutoff
// (truncated to BSON's millisecond, so nothing after cutoff matches). Each branch is an
// exact range of IndexFinished.
func finishedBy(cutoff time.Time) bson.D {
	at := bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: cutoff.UTC().Truncate(time.Millisecond)}}
	return bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fLatest, Value: string(Succeeded)}, {Key: fNoReplay, Value: bson.D{{Key: "$in", Value: bson.A{false, true}}}},
			{Key: fReceiptAt, Value: at}},
		bson.D{{Key: fLatest, Value: string(Failed)}, {Key: fNoReplay, Value: true}, {Key: fReceiptAt, Value: at}},
	}}}
}

// expired is a finished invocation past the cutoff as the retention read it: what its
// delete is guarded by.
type expired struct {
	ID    string `bson:"_id"`
	Rev   int64  `bson:"rev"`
	Claim string `bson:"claim"`
}

// deleteExpiredFilter is the filter of the deleteMany of each of exp (sent in _id order),
// each only at the claim and revision read, and while still finished at or before cutoff.
func deleteExpiredFilter(exp []expired, cutoff time.Time) bson.D {
	sorted := slices.SortedFunc(slices.Values(exp), func(a, b expired) int { return strings.Compare(a.ID, b.ID) })
	each := make(bson.A, len(sorted))
	for i, e := range sorted {
		each[i] = bson.D{{Key: fID, Value: e.ID}, {Key: fClaim, Value: e.Claim}, {Key: fRev, Value: e.Rev}}
	}
	return bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "$or", Value: each}}, finishedBy(cutoff)}}}
}

// DeleteExpired deletes up to limit finished invocations (Invocation.Finished) whose
// finishing receipt was recorded at or before cutoff, in no particular order, and returns
// how many it deleted. It reads them on IndexFinished (one find, a majority read from the
// primary), then deletes them with one deleteMany at the journal's write concern. Its filter
// names each invocation with the claim and revision read and the finished condition. So an
// invocation written since the read (a checkpoint moves the revision), claimed anew, or
// altered so that it is no longer finished, is kept. It then adds the number deleted to the
// retention's totals (RetentionTotals; one update, and an insert the first time), and to
// Stats and the OpenTelemetry counter execstore.retention.deleted.
//
// Deleting an invocation forgets its id: a later Claim of it claims it anew, and its
// operation can run again. A fence of a deleted invocation gets execstore.ErrNotFound.
// Invocations finished before the journal recorded receipt times have none, and are never
// deleted.
//
// It refuses, before any I/O and with execstore.ErrInvalid, a zero cutoff and a limit below
// 1 or above MaxRetentionBatch. While the journal is uncertain (Uncertain), it refuses with
// an *UncertainError, as every mutation. A read that fails returns the read's error, and
// nothing was deleted. A delete whose outcome is unknown is an
// *execstore.OutcomeUnknownError, and leaves the journal as it was. Whether or not it
// landed, every later call learns it from the server: a fence names the claim and revision
// a deleted document cannot match, and Claim decides by its insert. A count that fails after
// the delete returns the number deleted with the count's error: the totals then fall short.
func (j *Journal) DeleteExpired(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if cutoff.IsZero() {
		return 0, contract.Invalid("cutoff", "must not be the zero time")
	}
	if limit < 1 || limit > MaxRetentionBatch {
		return 0, contract.Invalid("limit", "must be between 1 and %d, got %d", MaxRetentionBatch, limit)
	}
	if err := j.uncertain.refusal(); err != nil {
		return 0, err
	}
	return submit(ctx, j, "delete_expired", "", func(ctx context.Context) (int64, error) {
		exp, err := j.expiredBy(ctx, cutoff, limit)
		if err != nil || len(exp) == 0 {
			return 0, err
		}
		return j.deleteExpired(ctx, exp, cutoff)
	})
}

// expiredBy reads up to limit invocations finished at or before cutoff: their ids, claims
// and revisions.
func (j *Journal) expiredBy(ctx context.Context, cutoff time.Time, limit int) ([]expired, error) {
	opts := options.Find().SetProjection(bson.D{{Key: fClaim, Value: 1}, {Key: fRev, Value: 1}}).SetLimit(int64(limit))
	cur, err := j.coll.Find(ctx, finishedBy(cutoff), opts)
	if err != nil {
		return nil, outcome.ReadFailureOf(nounCollection, "retention read", j.coll.Name(), err)
	}
	var exp []expired
	if err := cur.All(ctx, &exp); err != nil {
		return nil, outcome.ReadFailureOf(nounCollection, "retention read", j.coll.Name(), err)
	}
	return exp, nil
}

// nounCollection names what the retention's errors are about: the journal's collection.
const nounCollection = "journal collection"

// deleteExpired deletes exp, each only as read and while still finished at or before cutoff,
// then counts what it deleted.
func (j *Journal) deleteExpired(ctx context.Context, exp []expired, cutoff time.Time) (int64, error) {
	wctx, cancel := context.WithTimeout(ctx, j.opts.WriteTimeout)
	res, err := j.coll.DeleteMany(wctx, deleteExpiredFilter(exp, cutoff))
	cancel()
	if err != nil {
		return 0, outcome.WriteFailureOf(nounCollection, "retention delete", j.coll.Name(), err)
	}
	n := res.DeletedCount
	if n == 0 {
		return 0, nil
	}
	j.retentionDeleted.Add(n)
	j.retained.add(n)
	return n, j.countDeleted(ctx, n)
}

// The retention's counting document: ops.RetentionDocument's shape, the count under
// deleted.invocations.
const retentionCountKey = ops.FieldRetentionDeleted + ".invocations"

// counters is the collection of the retention's counting document.
func (j *Journal) counters() *mongo.Collection {
	return j.coll.Database().Collection(ops.CountersCollection, options.Collection().SetReadPreference(readpref.Primary()))
}

// countDeleted adds n to the counting document, created first when it is missing: an update
// that matches nothing, an insert (a duplicate key means another process created it), and
// the update again. last_at is this process's clock.
func (j *Journal) countDeleted(ctx context.Context, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, j.opts.WriteTimeout)
	defer cancel()
	id := ops.RetentionID(j.coll.Name())
	filter := bson.D{{Key: fID, Value: id}}
	update := bson.D{{Key: "$inc", Value: bson.D{{Key: retentionCountKey, Value: n}}},
		{Key: "$max", Value: bson.D{{Key: ops.FieldRetentionLastAt, Value: time.Now().UTC().Truncate(time.Millisecond)}}}}
	for range 2 {
		res, err := j.counters().UpdateOne(ctx, filter, update)
		if err != nil {
			return outcome.WriteFailureOf(nounCollection, "retention count", j.coll.Name(), err)
		}
		if res.MatchedCount > 0 {
			return nil
		}
		if _, err := j.counters().InsertOne(ctx, ops.RetentionDocument(j.coll.Name())); err != nil && !unique.IsDuplicateKey(err) {
			return outcome.WriteFailureOf(nounCollection, "retention count", j.coll.Name(), err)
		}
	}
	return fmt.Errorf("journal: counting deleted invocations: %s matched nothing after it was created", id)
}

// RetentionTotals is what the retention has deleted from a journal's collection, by every
// process, since the collection's counting document was created.
type RetentionTotals struct {
	Deleted int64     // invocations deleted
	LastAt  time.Time // when the last were counted, by the deleter's clock; zero for never
}

// RetentionTotals returns what the retention deleted from the journal's collection, as a
// majority read finds its counting document (ops.RetentionID of the collection, in
// ops.CountersCollection of the journal's database): zero totals when none was counted yet.
// A count whose outcome was unknown may be missing: the totals never exceed what was
// deleted. Cost: one find of one document.
func (j *Journal) RetentionTotals(ctx context.Context) (RetentionTotals, error) {
	return submit(ctx, j, "retention_totals", "", func(ctx context.Context) (RetentionTotals, error) {
		var doc struct {
			Deleted struct {
				Invocations int64 `bson:"invocations"`
			} `bson:"deleted"`
			LastAt time.Time `bson:"last_at"`
		}
		err := j.counters().FindOne(ctx, bson.D{{Key: fID, Value: ops.RetentionID(j.coll.Name())}}).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return RetentionTotals{}, nil
		}
		if err != nil {
			return RetentionTotals{}, outcome.ReadFailureOf(nounCollection, "retention totals read", j.coll.Name(), err)
		}
		totals := RetentionTotals{Deleted: doc.Deleted.Invocations}
		if !doc.LastAt.IsZero() {
			totals.LastAt = doc.LastAt.UTC()
		}
		return totals, nil
	})
}

// retainedCounter is the OpenTelemetry counter execstore.retention.deleted, with the
// journal's attributes; the zero value (no telemetry) counts nothing.
type retainedCounter struct {
	counter metric.Int64Counter
	attrs   metric.AddOption
}

// newRetainedCounter returns the counter on m (nil: none) for the journal's database and
// collection.
func newRetainedCounter(m metric.Meter, database, collection string) retainedCounter {
	if m == nil {
		return retainedCounter{}
	}
	c, _ := m.Int64Counter(telemetry.RetentionDeleted, metric.WithDescription(telemetry.RetentionDeletedDescription))
	return retainedCounter{counter: c, attrs: metric.WithAttributes(attribute.String("execstore.store", "journal"),
		attribute.String("db.namespace", database), attribute.String("db.collection.name", collection))}
}

func (r retainedCounter) add(n int64) {
	if r.counter != nil {
		r.counter.Add(context.Background(), n, r.attrs)
	}
}

// retainLoop runs the retention (Options.Retention) one RetentionInterval after Open and then
// every RetentionInterval, until stop is closed.
func (j *Journal) retainLoop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTimer(j.opts.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		j.retainOnce(ctx, stop)
		t.Reset(j.opts.RetentionInterval)
	}
}

// retainOnce deletes what is past the retention now, a batch at a time, again while a
// batch deletes RetentionBatch.
func (j *Journal) retainOnce(ctx context.Context, stop <-chan struct{}) {
	cutoff := time.Now().Add(-j.opts.Retention)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, err := j.DeleteExpired(ctx, cutoff, j.opts.RetentionBatch)
		if err != nil && ctx.Err() == nil && j.opts.Logger != nil {
			j.opts.Logger.Warn("journal: retention run failed; it runs again at the next interval",
				"collection", j.coll.Name(), "deleted", n, "err", err)
		}
		if j.opts.retained != nil {
			j.opts.retained(n, err)
		}
		if err != nil || n < int64(j.opts.RetentionBatch) {
			return
		}
	}
}
