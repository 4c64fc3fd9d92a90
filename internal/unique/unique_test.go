package unique

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestIsDuplicateKey(t *testing.T) {
	pgDup := `duplicate key value violates unique constraint "documents_rum_index_1"`
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("E11000 duplicate key"), false},
		{"insert 11000", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 11000, Message: "E11000 duplicate key error"}}}, true},
		{"findAndModify 11000", mongo.CommandError{Code: 11000, Message: "E11000 duplicate key error"}, true},
		{"wrapped", fmt.Errorf("claim: %w", mongo.CommandError{Code: 11000}), true},
		{"row-locking engine, command", mongo.CommandError{Code: 1, Name: "InternalError", Message: pgDup}, true},
		{"row-locking engine, write error", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 1, Message: pgDup}}}, true},
		{"row-locking engine, bulk", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 1, Message: pgDup}}}}, true},
		{"other internal error", mongo.CommandError{Code: 1, Name: "InternalError", Message: "deadlock detected"}, false},
		{"unique message under another code", mongo.CommandError{Code: 2, Message: pgDup}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, IsDuplicateKey(c.err))
		})
	}
}

func TestUpsertFilterIsNotIDOnly(t *testing.T) {
	f := UpsertFilter("k")
	require.Len(t, f, 2)
	assert.Equal(t, "_id", f[0].Key)
	assert.Equal(t, "k", f[0].Value)
	assert.Equal(t, bson.D{{Key: "$exists", Value: false}}, f[1].Value)
}

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

func TestIDOnlyUpserts(t *testing.T) {
	idOnly := bson.D{{Key: "_id", Value: "k"}}
	cases := []struct {
		name string
		cmd  bson.D
		want int
	}{
		{"findAndModify upsert by _id", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: idOnly}, {Key: "upsert", Value: true}}, 1},
		{"findAndModify upsert by _id $eq", bson.D{{Key: "findAndModify", Value: "c"},
			{Key: "query", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: "k"}}}}}, {Key: "upsert", Value: true}}, 1},
		{"findAndModify guarded upsert", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: UpsertFilter("k")}, {Key: "upsert", Value: true}}, 0},
		{"findAndModify without upsert", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: idOnly}}, 0},
		{"update statements", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: idOnly}, {Key: "u", Value: bson.D{}}, {Key: "upsert", Value: true}},
			bson.D{{Key: "q", Value: UpsertFilter("k")}, {Key: "u", Value: bson.D{}}, {Key: "upsert", Value: true}},
			bson.D{{Key: "q", Value: idOnly}, {Key: "u", Value: bson.D{}}},
		}}}, 1},
		{"client bulkWrite", bson.D{{Key: "bulkWrite", Value: 1}, {Key: "ops", Value: bson.A{
			bson.D{{Key: "update", Value: int32(0)}, {Key: "filter", Value: idOnly}, {Key: "upsert", Value: true}},
			bson.D{{Key: "insert", Value: int32(0)}, {Key: "document", Value: idOnly}},
		}}}, 1},
		{"insert", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{idOnly}}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Len(t, IDOnlyUpserts(raw(t, c.cmd)), c.want)
		})
	}
}
