package connect

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// The probes' command documents, exactly: each write matches no document and inserts none.
func TestProbeCommandDocuments(t *testing.T) {
	ext := func(d bson.D) string {
		raw, err := bson.MarshalExtJSON(d, false, false)
		require.NoError(t, err)
		return string(raw)
	}
	writes := nowInWritesCommands("idempotency")
	require.Len(t, writes, 2)
	assert.Equal(t, `{"findAndModify":"idempotency","query":{"_id":{"$in":[]}},"update":[{"$set":{"probed_at":"$$NOW"}}]}`, ext(writes[0]))
	assert.Equal(t, `{"update":"idempotency","updates":[{"q":{"_id":{"$in":[]}},"u":[{"$set":{"probed_at":"$$NOW"}}]}]}`, ext(writes[1]))
	assert.Equal(t, `{"aggregate":1,"pipeline":[{"$documents":[{}]},{"$project":{"_id":0,"now":"$$NOW"}}],"cursor":{}}`, ext(NowInReadsCommand()))
	assert.Equal(t, `{"find":"executions","filter":{"_id":{"$in":[]}},"projection":{"hit":{"$in":["probe",{"$ifNull":["$outbox",[]]}]}},"limit":1}`,
		ext(expressionProjectionsCommand("executions")))
}

// A probe's answer: served, refused (an error reply of a refusal code, a write error in an
// ok: 1 reply, or a reply the check refuses), or no answer at all, which is an error.
func TestProbeAnswers(t *testing.T) {
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		require.NoError(t, err)
		return b
	}
	assert.NoError(t, writeErrorOf(raw(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 0}})))
	err := writeErrorOf(raw(bson.D{{Key: "ok", Value: 1}, {Key: "writeErrors", Value: bson.A{
		bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 9}, {Key: "errmsg", Value: "$$NOW is not supported in this context."}}}}}))
	var refused probeRefusal
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, "(code 9) $$NOW is not supported in this context.", refused.Error())
	err = writeErrorOf(raw(bson.D{{Key: "ok", Value: 1}, {Key: "writeErrors", Value: bson.A{
		bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 13}, {Key: "errmsg", Value: "not authorized"}}}}}))
	require.Error(t, err)
	assert.NotErrorAs(t, err, &refused, "Unauthorized says nothing of the feature")
	assert.Error(t, writeErrorOf(raw(bson.D{{Key: "ok", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}}}})))

	now, err := NowOf(raw(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{
		bson.D{{Key: "now", Value: bson.DateTime(1234)}}}}}}}))
	require.NoError(t, err)
	assert.Equal(t, bson.DateTime(1234), now)
	_, err = NowOf(raw(bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{
		bson.D{{Key: "now", Value: "$$NOW"}}}}}}}))
	assert.Error(t, err, "a literal is not the server's time")

	assert.Equal(t, MongoDB, Choose(Detect, server.Probe{Served: true}, server.Probe{Served: true}))
	assert.Equal(t, FerretDB, Choose(Detect, server.Probe{Served: true}, server.Probe{}))
	assert.Equal(t, MongoDB, Choose(MongoDB, server.Probe{}))
	assert.Equal(t, FerretDB, Choose(FerretDB, server.Probe{Served: true}))
}

// On the test server every probe answers, served or refused, and says what the server does:
// a refused NowInWrites is a $$NOW pipeline that the server refuses on a document of the
// test's own, a served one sets a date. No probe writes anything.
func TestProbesOnTheServer(t *testing.T) {
	ctx := context.Background()
	client := connectPlain(t)
	db := client.Database(testserver.Database(t, "connect"))
	t.Cleanup(func() { _ = db.Drop(ctx) })
	coll := db.Collection("probed")
	require.NoError(t, db.CreateCollection(ctx, "probed"))

	writes, err := ProbeNowInWrites(ctx, coll)
	require.NoError(t, err)
	reads, err := ProbeNowInReads(ctx, db)
	require.NoError(t, err)
	projections, err := ProbeExpressionProjections(ctx, coll)
	require.NoError(t, err)
	t.Logf("probes: %+v %+v %+v", writes, reads, projections)
	n, err := coll.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Zero(t, n, "the probes wrote nothing")

	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "doc"}, {Key: "outbox", Value: bson.A{"probe"}}})
	require.NoError(t, err)
	var got bson.Raw
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "doc"}}, nowPipeline,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&got)
	if writes.Served {
		require.NoError(t, err)
		assert.Equal(t, bson.TypeDateTime, got.Lookup("probed_at").Type)
	} else {
		assert.Error(t, err, "the server refused the probe, and refuses the write")
		assert.NotEmpty(t, writes.Refusal)
	}
	err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: "doc"}},
		options.FindOne().SetProjection(bson.D{{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
			"probe", bson.D{{Key: "$ifNull", Value: bson.A{"$outbox", bson.A{}}}}}}}}})).Decode(&got)
	if projections.Served {
		require.NoError(t, err)
		assert.True(t, got.Lookup("hit").Boolean())
	} else {
		assert.Error(t, err)
	}
}

// A probe that gets no answer (nothing listens) fails: it never picks a formulation.
func TestProbeWithoutAnswerFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetServerSelectionTimeout(200 * time.Millisecond))
	require.NoError(t, err)
	defer client.Disconnect(context.Background())
	db := client.Database("x")
	_, err = ProbeNowInWrites(context.Background(), db.Collection("c"))
	assert.ErrorContains(t, err, "probing the server for $$NOW in update pipelines")
	_, err = ProbeNowInReads(context.Background(), db)
	assert.Error(t, err)
}

// A refusal is an error reply of the codes with which a server refuses what it does not
// serve, while the caller's context lasts; a lost connection, a deadline, a server stepping
// down or the caller's own end is no answer about the feature.
func TestIsRefusal(t *testing.T) {
	ctx := context.Background()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"a standalone server's $changeStream", ctx, mongo.CommandError{Code: 40573, Name: "Location40573"}, true},
		{"DocumentDB's $changeStream", ctx, mongo.CommandError{Code: 115, Name: "CommandNotSupported"}, true},
		{"FerretDB's $changeStream", ctx, mongo.CommandError{Code: 238, Name: "NotImplemented"}, true},
		{"wrapped", ctx, fmt.Errorf("open: %w", mongo.CommandError{Code: 40324}), true},
		{"a lost connection", ctx, mongo.CommandError{Code: 238, Labels: []string{"NetworkError"}}, false},
		{"a server stepping down", ctx, mongo.CommandError{Code: 11602, Name: "InterruptedDueToReplStateChange"}, false},
		{"not primary", ctx, mongo.CommandError{Code: 10107, Name: "NotWritablePrimary"}, false},
		{"the caller's context ended", ended, mongo.CommandError{Code: 238}, false},
		{"a deadline", ctx, context.DeadlineExceeded, false},
		{"no error", ctx, nil, false},
	} {
		assert.Equal(t, c.want, IsRefusal(c.ctx, c.err), c.name)
	}
}
