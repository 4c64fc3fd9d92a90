package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// MongoDB's codes for a write past the 16 MiB limit.
const (
	codeInsertTooLarge = 2     // BadValue: "object to insert too large"
	codeUpdateTooLarge = 17419 // "Resulting document after update is larger than 16777216"
	codeUpsertTooLarge = 17420 // "Document to upsert is larger than 16777216"
)

// mib is a mebibyte.
const mib = 1 << 20

// bytesOf returns n bytes of binary data.
func bytesOf(n int) bson.Binary { return bson.Binary{Data: make([]byte, n)} }

// sizeOf returns doc's size as BSON.
func sizeOf(t *testing.T, doc any) int {
	t.Helper()
	raw, err := bson.Marshal(doc)
	require.NoError(t, err)
	return len(raw)
}

// stored returns the document of coll with id, as stored; nil when there is none.
func stored(ctx context.Context, t *testing.T, coll *mongo.Collection, id any) bson.Raw {
	t.Helper()
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	require.NoError(t, err)
	return raw
}

// writeErrorCodes returns the index and code of every write error err carries.
func writeErrorCodes(t *testing.T, err error) map[int]int {
	t.Helper()
	codes := map[int]int{}
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	switch {
	case errors.As(err, &we):
		for _, e := range we.WriteErrors {
			codes[e.Index] = e.Code
		}
	case errors.As(err, &bwe):
		for _, e := range bwe.WriteErrors {
			codes[e.Index] = e.Code
		}
	default:
		t.Fatalf("want write errors, got %T: %v", err, err)
	}
	return codes
}

// requireFront runs a test of the front's refusals on the embedded server only: another
// server refuses with codes of its own (DocumentDB: 285999133 for an update, BadValue as a
// command error for an insert), which aio's tests check map to execstore.ErrInvalid.
func requireFront(t *testing.T) {
	t.Helper()
	srv.RequireEmbedded(t, "the test checks the embedded server's front against MongoDB's codes")
}

// assertUpdateTooLarge checks that code is MongoDB's refusal of an update past the limit:
// 17419, which the embedded server gives too (MongoDB 8.x may give 8375908).
func assertUpdateTooLarge(t *testing.T, code int) {
	t.Helper()
	if srv.External && code == 8375908 {
		return
	}
	assert.Equal(t, codeUpdateTooLarge, code)
}

func TestMaxDocumentSizeIsMongoDBs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var hello struct {
		MaxBsonObjectSize int `bson:"maxBsonObjectSize"`
	}
	client := connect(t, srv.URI, 1)
	require.NoError(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello))
	assert.Equal(t, execstore.MaxDocumentBytes, hello.MaxBsonObjectSize)
}

// The user's case: three updates each pushing a 9 MiB event onto one document. The first
// fits; the two others would make an 18 MiB document and are refused, and the document
// stays as the first left it.
func TestPushesPastLimitAreRefused(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "exe"}, {Key: "version", Value: 1}})
	require.NoError(t, err)

	push := bson.D{{Key: "$push", Value: bson.D{{Key: "outbox", Value: bytesOf(9 * mib)}}}, {Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}}}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "exe"}}, push)
	require.NoError(t, err)
	before := stored(ctx, t, coll, "exe")

	for range 2 {
		_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "exe"}}, push)
		require.Error(t, err)
		codes := writeErrorCodes(t, err)
		require.Len(t, codes, 1)
		assertUpdateTooLarge(t, codes[0])
		assert.Equal(t, before, stored(ctx, t, coll, "exe"), "the refused update left the document unchanged")
	}
	assert.Less(t, len(before), execstore.MaxDocumentBytes)
}

// An update that makes a document of exactly 16 MiB is applied; one that makes it a byte
// larger is refused, and the document is unchanged.
func TestUpdateUpToLimit(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(mib)}})
	require.NoError(t, err)
	before := stored(ctx, t, coll, 1)

	overhead := sizeOf(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(mib)}, {Key: "b", Value: bytesOf(0)}})
	fill := execstore.MaxDocumentBytes - overhead

	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bytesOf(fill + 1)}}}})
	require.Error(t, err, "a document one byte past the limit")
	codes := writeErrorCodes(t, err)
	require.Len(t, codes, 1)
	assertUpdateTooLarge(t, codes[0])
	assert.Equal(t, before, stored(ctx, t, coll, 1), "the refused update left the document unchanged")

	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bytesOf(fill)}}}})
	require.NoError(t, err, "a document of exactly the limit")
	assert.EqualValues(t, 1, res.ModifiedCount)
	assert.Len(t, stored(ctx, t, coll, 1), execstore.MaxDocumentBytes)
}

// A replacement past the limit is refused like an update.
func TestReplacePastLimitIsRefused(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "small"}})
	require.NoError(t, err)
	before := stored(ctx, t, coll, 1)

	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "a", Value: bytesOf(execstore.MaxDocumentBytes)}})
	require.Error(t, err)
	codes := writeErrorCodes(t, err)
	require.Len(t, codes, 1)
	assertUpdateTooLarge(t, codes[0])
	assert.Equal(t, before, stored(ctx, t, coll, 1))
}

// An upsert that would insert a document past the limit is refused, and inserts nothing.
func TestUpsertPastLimitIsRefused(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))

	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: bytesOf(9 * mib)}, {Key: "b", Value: bytesOf(8 * mib)}}}},
		options.UpdateOne().SetUpsert(true))
	require.Error(t, err)
	codes := writeErrorCodes(t, err)
	require.Len(t, codes, 1)
	assert.Equal(t, codeUpsertTooLarge, codes[0])
	assert.Nil(t, stored(ctx, t, coll, 1), "nothing was inserted")
}

// An insert of a document past the limit is refused with BadValue; one of exactly the limit
// is stored.
func TestInsertUpToLimit(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	fill := execstore.MaxDocumentBytes - sizeOf(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(0)}})

	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(fill + 1)}})
	require.Error(t, err, "a document one byte past the limit")
	codes := writeErrorCodes(t, err)
	require.Len(t, codes, 1)
	assert.Equal(t, codeInsertTooLarge, codes[0])
	var we mongo.WriteException
	require.ErrorAs(t, err, &we)
	assert.Contains(t, we.WriteErrors[0].Message, "too large")
	assert.Nil(t, stored(ctx, t, coll, 1), "nothing was inserted")

	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(fill)}})
	require.NoError(t, err, "a document of exactly the limit")
	assert.Len(t, stored(ctx, t, coll, 1), execstore.MaxDocumentBytes)
}

// A findAndModify whose update would take the document past the limit fails with MongoDB's
// command error, and the document is unchanged.
func TestFindAndModifyPastLimitIsRefused(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(9 * mib)}})
	require.NoError(t, err)
	before := stored(ctx, t, coll, 1)

	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bytesOf(8 * mib)}}}}).Err()
	var ce mongo.CommandError
	require.ErrorAs(t, err, &ce)
	assertUpdateTooLarge(t, int(ce.Code))
	assert.Equal(t, before, stored(ctx, t, coll, 1))

	got, err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bytesOf(mib)}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
	require.NoError(t, err, "an update within the limit")
	assert.Greater(t, len(got), 10*mib)
}

// In a bulk write, the statement past the limit is refused with its own index; the others
// run as on MongoDB: an ordered bulk stops at the refused one, an unordered one runs all the
// others.
func TestBulkWritePastLimit(t *testing.T) {
	requireFront(t)
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "unordered"}[ordered], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			coll := collection(t, connect(t, srv.URI, 2))
			_, err := coll.InsertMany(ctx, []any{
				bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 0}},
				bson.D{{Key: "_id", Value: "big"}, {Key: "n", Value: 0}, {Key: "data", Value: bytesOf(9 * mib)}},
				bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 0}},
			})
			require.NoError(t, err)
			bigBefore := stored(ctx, t, coll, "big")

			inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
			res, err := coll.BulkWrite(ctx, []mongo.WriteModel{
				mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: "a"}}).SetUpdate(inc),
				mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: "big"}}).SetUpdate(
					bson.D{{Key: "$set", Value: bson.D{{Key: "more", Value: bytesOf(8 * mib)}}}}),
				mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: "c"}}).SetUpdate(inc),
				mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: "d"}}).SetUpdate(inc).SetUpsert(true),
			}, options.BulkWrite().SetOrdered(ordered))
			require.Error(t, err)
			codes := writeErrorCodes(t, err)
			require.Len(t, codes, 1, "one statement refused: %v", err)
			require.Contains(t, codes, 1, "the refused statement's index")
			assertUpdateTooLarge(t, codes[1])

			n := func(id string) any {
				doc := stored(ctx, t, coll, id)
				if doc == nil {
					return nil
				}
				return doc.Lookup("n").AsInt64()
			}
			assert.EqualValues(t, 1, n("a"), "the statement before the refused one ran")
			assert.Equal(t, bigBefore, stored(ctx, t, coll, "big"), "the refused statement left its document unchanged")
			if ordered {
				assert.EqualValues(t, 0, n("c"), "an ordered bulk stops at the refused statement")
				assert.Nil(t, n("d"))
				assert.EqualValues(t, 1, res.MatchedCount)
				assert.EqualValues(t, 1, res.ModifiedCount)
				return
			}
			assert.EqualValues(t, 1, n("c"), "an unordered bulk runs the statements after the refused one")
			assert.EqualValues(t, 1, n("d"))
			assert.EqualValues(t, 2, res.MatchedCount)
			assert.EqualValues(t, 2, res.ModifiedCount)
			assert.EqualValues(t, 1, res.UpsertedCount)
			assert.Contains(t, res.UpsertedIDs, int64(3), "the upsert keeps its index")
		})
	}
}

// An insert of several documents, one of them past the limit: an ordered one stores those
// before it, an unordered one all the others.
func TestInsertManyPastLimit(t *testing.T) {
	requireFront(t)
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "unordered"}[ordered], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			coll := collection(t, connect(t, srv.URI, 2))
			_, err := coll.InsertMany(ctx, []any{
				bson.D{{Key: "_id", Value: 0}},
				bson.D{{Key: "_id", Value: 1}, {Key: "data", Value: bytesOf(execstore.MaxDocumentBytes)}},
				bson.D{{Key: "_id", Value: 2}},
			}, options.InsertMany().SetOrdered(ordered))
			require.Error(t, err)
			codes := writeErrorCodes(t, err)
			assert.Equal(t, map[int]int{1: codeInsertTooLarge}, codes)
			assert.NotNil(t, stored(ctx, t, coll, 0))
			assert.Nil(t, stored(ctx, t, coll, 1))
			if ordered {
				assert.Nil(t, stored(ctx, t, coll, 2), "an ordered insert stops at the refused document")
			} else {
				assert.NotNil(t, stored(ctx, t, coll, 2), "an unordered insert stores the documents after it")
			}
		})
	}
}

// TestBareStoresPastLimit shows what the front's check is for: FerretDB alone stores a
// document MongoDB refuses.
func TestBareStoresPastLimit(t *testing.T) {
	srv.RequireEmbedded(t, "there is no FerretDB without the front to write to")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.BareURI, 1))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bytesOf(9 * mib)}})
	require.NoError(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bytesOf(9 * mib)}}}})
	require.NoError(t, err)
	assert.Greater(t, len(stored(ctx, t, coll, 1)), execstore.MaxDocumentBytes)
}

// findsServed returns how many find commands FerretDB has served, by its serverStatus.
func findsServed(ctx context.Context, t *testing.T, client *mongo.Client) int64 {
	t.Helper()
	var status struct {
		Metrics struct {
			Commands map[string]struct {
				Total int64 `bson:"total"`
			} `bson:"commands"`
		} `bson:"metrics"`
	}
	require.NoError(t, client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&status))
	return status.Metrics.Commands["find"].Total
}

// An update by _id of a document the front has seen written costs no read: the front keeps
// a bound of its size. A document written without the front is read once, by the first
// update, and not again.
func TestUpdatesByIDReadNothing(t *testing.T) {
	srv.RequireEmbedded(t, "the test counts the reads the front's size check makes")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client := connect(t, srv.URI, 1)
	coll := collection(t, client)
	bare := connect(t, srv.BareURI, 1).Database(coll.Database().Name()).Collection(coll.Name())
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "seen"}, {Key: "n", Value: 0}})
	require.NoError(t, err)
	_, err = bare.InsertOne(ctx, bson.D{{Key: "_id", Value: "unseen"}, {Key: "n", Value: 0}})
	require.NoError(t, err)

	const updates = 50
	update := func(id string, i int) {
		t.Helper()
		// Like a commit: a counter, a field named by number, a findAndModify now and then.
		u := bson.D{
			{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}},
			{Key: "$set", Value: bson.D{{Key: "outbox." + strconv.Itoa(100+i), Value: bson.D{{Key: "event", Value: "e"}}}}},
		}
		if i%10 == 9 {
			require.NoError(t, coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}}, u).Err())
			return
		}
		res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: i}}, u)
		require.NoError(t, err)
		require.EqualValues(t, 1, res.ModifiedCount)
	}

	finds := findsServed(ctx, t, client)
	for i := range updates {
		update("seen", i)
	}
	afterSeen := findsServed(ctx, t, client)
	for i := range updates {
		update("unseen", i)
	}
	afterUnseen := findsServed(ctx, t, client)

	assert.Zero(t, afterSeen-finds, "reads for %d updates of a document inserted through the front", updates)
	assert.EqualValues(t, 1, afterUnseen-afterSeen, "reads for %d updates of a document inserted without the front", updates)
	for _, id := range []string{"seen", "unseen"} {
		assert.EqualValues(t, updates, stored(ctx, t, coll, id).Lookup("n").AsInt64(), id)
	}
}

// A stream of small updates that each fit but together take a document past the limit: the
// one that would pass it is refused and leaves the document as it was, however few bytes
// each update adds.
func TestSmallUpdatesAccumulatePastLimit(t *testing.T) {
	requireFront(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, 2))
	// The document starts far enough below the limit for the first update to be let through
	// on what the front knows of its size alone (the update's bytes times growthFactor, 4,
	// and a KiB), and the fifth passes the limit: had the bound not grown with each update,
	// every one of them would be let through unread.
	const chunk, fitting = 32 << 10, 4
	field := func(i int) bson.D { return bson.D{{Key: fmt.Sprintf("f%d", i), Value: bytesOf(chunk)}} }
	element := sizeOf(t, field(0)) - sizeOf(t, bson.D{})
	base := execstore.MaxDocumentBytes - fitting*element - element/2 - 2<<10 -
		sizeOf(t, bson.D{{Key: "_id", Value: "grow"}, {Key: "base", Value: bytesOf(0)}})
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "grow"}, {Key: "base", Value: bytesOf(base)}})
	require.NoError(t, err)
	size := sizeOf(t, bson.D{{Key: "_id", Value: "grow"}, {Key: "base", Value: bytesOf(base)}})

	for i := range fitting {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "grow"}}, bson.D{{Key: "$set", Value: field(i)}})
		require.NoError(t, err, "update %d makes a document of %d bytes", i, size+element)
		size += element
	}
	require.Greater(t, size+element, execstore.MaxDocumentBytes)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "grow"}}, bson.D{{Key: "$set", Value: field(fitting)}})
	require.Error(t, err, "update %d would make a document of %d bytes", fitting, size+element)
	codes := writeErrorCodes(t, err)
	require.Len(t, codes, 1)
	assertUpdateTooLarge(t, codes[0])
	doc := stored(ctx, t, coll, "grow")
	assert.Len(t, doc, size, "the fitting updates were applied, the refused one left the document as it was")
	_, err = doc.LookupErr(fmt.Sprintf("f%d", fitting))
	assert.Error(t, err, "the refused update's field")
}

// What the front knows of a document's size does not outlive the document: after a delete, a
// drop or a failed insert, a document with the same _id is judged by its own size. Had the
// front kept the small document's bound, it would let the big one pass the limit.
func TestSizeAfterDocumentReplaced(t *testing.T) {
	requireFront(t)
	small := bson.D{{Key: "_id", Value: "a"}, {Key: "data", Value: "small"}}
	big := bson.D{{Key: "_id", Value: "a"}, {Key: "data", Value: bytesOf(13 * mib)}}
	set := func(field string, n int) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: bytesOf(n)}}}}
	}
	byID := bson.D{{Key: "_id", Value: "a"}}
	insertBig := func(ctx context.Context, t *testing.T, coll *mongo.Collection) {
		t.Helper()
		_, err := coll.InsertOne(ctx, big)
		require.NoError(t, err)
	}
	// refused checks that 3.5 MiB more is refused: the small document's bound would let it
	// through.
	refused := func(ctx context.Context, t *testing.T, coll *mongo.Collection) {
		t.Helper()
		_, err := coll.UpdateOne(ctx, byID, set("more", 7*mib/2))
		require.Error(t, err, "13 MiB and 3.5 MiB more")
		codes := writeErrorCodes(t, err)
		require.Len(t, codes, 1)
		assertUpdateTooLarge(t, codes[0])
	}

	for _, c := range []struct {
		name   string
		remove func(ctx context.Context, t *testing.T, coll *mongo.Collection)
	}{
		{"delete", func(ctx context.Context, t *testing.T, coll *mongo.Collection) {
			_, err := coll.DeleteOne(ctx, byID)
			require.NoError(t, err)
		}},
		{"delete by another field", func(ctx context.Context, t *testing.T, coll *mongo.Collection) {
			_, err := coll.DeleteMany(ctx, bson.D{{Key: "data", Value: "small"}})
			require.NoError(t, err)
		}},
		{"drop", func(ctx context.Context, t *testing.T, coll *mongo.Collection) {
			require.NoError(t, coll.Drop(ctx))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			coll := collection(t, connect(t, srv.URI, 2))
			_, err := coll.InsertOne(ctx, small)
			require.NoError(t, err)
			_, err = coll.UpdateOne(ctx, byID, set("x", 1))
			require.NoError(t, err)

			c.remove(ctx, t, coll)
			insertBig(ctx, t, coll)
			refused(ctx, t, coll)
		})
	}

	// An insert that fails on the _id leaves the stored document, and what is known of it.
	t.Run("duplicate insert", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		coll := collection(t, connect(t, srv.URI, 2))
		insertBig(ctx, t, coll)
		_, err := coll.InsertOne(ctx, small)
		require.True(t, mongo.IsDuplicateKeyError(err), "%v", err)
		refused(ctx, t, coll)
	})

	// A big document deleted and a small one inserted with its _id: the small one takes
	// updates up to the limit, and no further.
	t.Run("big then small", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		coll := collection(t, connect(t, srv.URI, 2))
		insertBig(ctx, t, coll)
		_, err := coll.DeleteOne(ctx, byID)
		require.NoError(t, err)
		_, err = coll.InsertOne(ctx, small)
		require.NoError(t, err)

		_, err = coll.UpdateOne(ctx, byID, set("more", 12*mib))
		require.NoError(t, err, "a small document and 12 MiB")
		_, err = coll.UpdateOne(ctx, byID, set("most", 5*mib))
		require.Error(t, err, "12 MiB and 5 MiB more")
		codes := writeErrorCodes(t, err)
		require.Len(t, codes, 1)
		assertUpdateTooLarge(t, codes[0])
		_, err = stored(ctx, t, coll, "a").LookupErr("most")
		assert.Error(t, err, "the refused update's field")
	})
}
