package idem

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/unique"
)

const token0 = "0123456789abcdef0123456789abcdef"

// extJSON renders v as relaxed extended JSON, for exact comparisons of command documents.
func extJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	require.NoError(t, err)
	return string(b)
}

// readableJSON is readableExpr as extended JSON: decodeRecord's rules on the server.
const readableJSON = `{"$and":[{"$in":[{"$type":"$_id"},["string"]]},{"$in":["$state",["CLAIMED","COMPLETED"]]},` +
	`{"$in":[{"$type":"$fingerprint"},["string"]]},{"$in":[{"$type":"$fingerprint_version"},["int","long"]]},` +
	`{"$in":[{"$type":"$claim_token"},["string"]]},` +
	`{"$eq":[{"$strLenBytes":{"$cond":[{"$in":[{"$type":"$claim_token"},["string"]]},"$claim_token",""]}},32]},` +
	`{"$in":[{"$type":"$claimed_at"},["date"]]},{"$in":[{"$type":"$lease_until"},["date"]]},` +
	`{"$or":[{"$eq":["$state","CLAIMED"]},{"$and":[{"$in":[{"$type":"$completed_at"},["date"]]},` +
	`{"$in":[{"$type":"$response_status"},["int","long"]]},{"$in":[{"$type":"$response_body"},["binData","missing"]]},` +
	`{"$in":[{"$type":"$response_headers"},["array","missing"]]},` +
	`{"$allElementsTrue":[{"$map":{"input":{"$cond":[{"$isArray":"$response_headers"},"$response_headers",[]]},"as":"h",` +
	`"in":{"$and":[{"$in":[{"$type":"$$h"},["object"]]},{"$in":[{"$type":"$$h.n"},["string"]]},{"$in":[{"$type":"$$h.v"},["array"]]},` +
	`{"$allElementsTrue":[{"$map":{"input":{"$cond":[{"$isArray":"$$h.v"},"$$h.v",[]]},"as":"x","in":{"$in":[{"$type":"$$x"},["string"]]}}}]}]}}}]}]}]}]}`

// The MongoDB formulation's command documents, field by field: the claim pipeline
// (with prev_state kept only when the record is taken, and caller strings as literals),
// complete and renew from $$NOW, the read with the server's now, the take-over of an
// unreadable record, the guards and the TTL index.
func TestMongoCommandDocuments(t *testing.T) {
	for name, c := range map[string]struct {
		got  any
		want string
	}{
		"claim filter": {claimFilter("k"), `{"v":{"_id":"k","__never_written":{"$exists":false}}}`},
		"claim pipeline": {claimPipeline(claimant{fingerprint: "$fp", version: 3, token: token0, holder: "$relay-1"}, 1500*time.Millisecond, time.Minute),
			`{"v":[{"$set":{"__take":{"$or":[{"$in":[{"$type":"$state"},["missing"]]},{"$and":[` + readableJSON + `,{"$lt":["$lease_until","$$NOW"]}]}]}}},` +
				`{"$set":{"prev_state":{"$cond":["$__take","$state","$prev_state"]},` +
				`"state":{"$cond":["$__take","CLAIMED","$state"]},` +
				`"fingerprint":{"$cond":["$__take",{"$literal":"$fp"},"$fingerprint"]},` +
				`"fingerprint_version":{"$cond":["$__take",3,"$fingerprint_version"]},` +
				`"claim_token":{"$cond":["$__take","` + token0 + `","$claim_token"]},` +
				`"holder":{"$cond":["$__take",{"$literal":"$relay-1"},"$holder"]},` +
				`"claimed_at":{"$cond":["$__take","$$NOW","$claimed_at"]},` +
				`"lease_until":{"$cond":["$__take",{"$add":["$$NOW",1500]},"$lease_until"]},` +
				`"expire_at":{"$cond":["$__take",{"$add":["$$NOW",61500]},"$expire_at"]},` +
				`"completed_at":{"$cond":["$__take",null,"$completed_at"]},` +
				`"response_status":{"$cond":["$__take",null,"$response_status"]},` +
				`"response_headers":{"$cond":["$__take",{"$literal":[]},"$response_headers"]},` +
				`"response_body":{"$cond":["$__take",{"$literal":{"$binary":{"base64":"","subType":"00"}}},"$response_body"]}}},` +
				`{"$unset":"__take"}]}`},
		"take over pipeline": {takeOverPipeline(claimant{fingerprint: "fp", version: 1, token: token0}, time.Second, time.Minute),
			`{"v":[{"$set":{"prev_state":null,"state":"CLAIMED","fingerprint":{"$literal":"fp"},"fingerprint_version":1,` +
				`"claim_token":"` + token0 + `","holder":{"$literal":""},"claimed_at":"$$NOW","lease_until":{"$add":["$$NOW",1000]},` +
				`"expire_at":{"$add":["$$NOW",61000]},"completed_at":null,"response_status":null,` +
				`"response_headers":{"$literal":[]},"response_body":{"$literal":{"$binary":{"base64":"","subType":"00"}}}}}]}`},
		"held filter": {heldFilter("k", token0), `{"v":{"_id":"k","state":"CLAIMED","claim_token":"` + token0 + `"}}`},
		"complete pipeline": {completePipeline(Response{Status: 201, Header: http.Header{"X-A": {"$1", "b"}}, Body: []byte("hi")}, time.Hour, time.Minute),
			`{"v":[{"$set":{"state":"COMPLETED","completed_at":"$$NOW","lease_until":{"$add":["$$NOW",3600000]},` +
				`"expire_at":{"$add":["$$NOW",3660000]},"response_status":201,` +
				`"response_headers":{"$literal":[{"n":"X-A","v":["$1","b"]}]},` +
				`"response_body":{"$literal":{"$binary":{"base64":"aGk=","subType":"00"}}}}}]}`},
		"renew pipeline": {renewPipeline(2*time.Second, time.Minute),
			`{"v":[{"$set":{"lease_until":{"$add":["$$NOW",2000]},"expire_at":{"$add":["$$NOW",62000]}}}]}`},
		"get pipeline":   {getPipeline("k"), `{"v":[{"$match":{"_id":"k"}},{"$set":{"__now":"$$NOW"}}]}`},
		"ttl index keys": {ttlIndex().Keys, `{"v":{"expire_at":1}}`},
		"corrupt guard, string token": {corruptGuard("k", mustRaw(t, bson.D{{Key: fToken, Value: "x"}})),
			`{"v":{"_id":"k","claim_token":"x"}}`},
		"corrupt guard, no token": {corruptGuard("k", mustRaw(t, bson.D{})),
			`{"v":{"_id":"k","claim_token":{"$exists":false}}}`},
		"corrupt guard, numeric token": {corruptGuard("k", mustRaw(t, bson.D{{Key: fToken, Value: int32(7)}})),
			`{"v":{"_id":"k","claim_token":{"$type":"int"}}}`},
		"corrupt guard, MinKey token": {corruptGuard("k", mustRaw(t, bson.D{{Key: fToken, Value: bson.MinKey{}}})),
			`{"v":{"_id":"k","claim_token":{"$type":"minKey"}}}`},
		"corrupt guard, MaxKey token": {corruptGuard("k", mustRaw(t, bson.D{{Key: fToken, Value: bson.MaxKey{}}})),
			`{"v":{"_id":"k","claim_token":{"$type":"maxKey"}}}`},
		"readable record": {readableExpr(), `{"v":` + readableJSON + `}`},
		"lease rounded up to whole ms": {renewPipeline(1500*time.Millisecond+400*time.Microsecond, time.Minute),
			`{"v":[{"$set":{"lease_until":{"$add":["$$NOW",1501]},"expire_at":{"$add":["$$NOW",61501]}}}]}`},
	} {
		assert.Equal(t, c.want, extJSON(t, c.got), name)
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// The MongoDB formulation's code path sends exactly the documents above: one findAndModify
// upsert per claim, guarded updates for complete and renew, an aggregate for reads. On
// servers that serve $$NOW in update pipelines they run; on the others (FerretDB 1.x, which
// refuses pipeline updates and TTL indexes, and DocumentDB, which refuses $$NOW in writes
// by default) the commands are only recorded, and the refusal is a plain error: nothing was
// applied.
func TestMongoFormulationSendsCommands(t *testing.T) {
	refused := !serverServesNowInWrites(t)
	var mu sync.Mutex
	sent := map[string]bson.Raw{}
	var idOnly []bson.Raw
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		sent[e.CommandName] = append(bson.Raw(nil), e.Command...)
		idOnly = append(idOnly, unique.IDOnlyUpserts(e.Command)...)
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetMonitor(monitor))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	db := client.Database(testDatabase(t))
	defer db.Drop(bg)
	m := &mongoForm{records{coll: db.Collection("idem"), settle: time.Second, grace: time.Minute}}
	if refused {
		if serverIsFerretDB(t) {
			assert.Error(t, m.ensureIndexes(bg), "FerretDB 1.x has no TTL index")
		} else {
			require.NoError(t, m.ensureIndexes(bg))
		}
		_, err = m.claim(bg, "k", claimant{fingerprint: "fp", version: 2, token: token0}, time.Second)
		require.Error(t, err)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "a refusal proves nothing was applied")
	} else {
		require.NoError(t, m.ensureIndexes(bg))
		c, err := m.claim(bg, "k", claimant{fingerprint: "fp", version: 2, token: token0}, time.Second)
		require.NoError(t, err)
		assert.Equal(t, New, c.Outcome)
		assert.Equal(t, token0, c.Token)
	}
	_, _ = m.complete(bg, "k", token0, Response{Status: 200}, time.Hour)
	_, _ = m.renew(bg, "k", token0, time.Second)
	_, _ = m.get(bg, "k")
	mu.Lock()
	defer mu.Unlock()
	fam := sent["findAndModify"]
	require.NotNil(t, fam)
	assert.Equal(t, "idem", fam.Lookup("findAndModify").StringValue())
	assert.Equal(t, `{"_id": "k","__never_written": {"$exists": false}}`, fam.Lookup("query").String())
	assert.Empty(t, idOnly, "no upsert of the _id alone: it has several winners on a row-locking engine")
	assert.True(t, fam.Lookup("upsert").Boolean())
	assert.True(t, fam.Lookup("new").Boolean())
	var pipeline bson.A
	require.NoError(t, fam.Lookup("update").Unmarshal(&pipeline))
	assert.Len(t, pipeline, 3)
	assert.Contains(t, fam.Lookup("update").String(), `"$$NOW"`)
	upd := sent["update"]
	require.NotNil(t, upd, "renew and complete are updates")
	assert.Contains(t, upd.Lookup("updates").String(), `"claim_token": "`+token0+`"`)
	agg := sent["aggregate"]
	require.NotNil(t, agg)
	assert.Contains(t, agg.Lookup("pipeline").String(), `"$$NOW"`)
	createIndexes := sent["createIndexes"]
	require.NotNil(t, createIndexes, "the TTL index is created at Open")
	assert.Contains(t, createIndexes.Lookup("indexes").String(), `"expireAfterSeconds": {"$numberInt":"0"}`)
}
