package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/unique"
)

// idemkitPort is the seed's MongoDB backend (idemkit/backends/mongo.py), ported as it is,
// over the bare driver: a claim is one findAndModify upsert of {_id: key} (with
// unique.UpsertFilter's predicate) whose aggregation
// pipeline takes the record when it is missing or its lease_until is before $$NOW, and keeps
// it otherwise; a complete is one update of {_id, state: CLAIMED, claim_token} with a
// pipeline setting the response and $$NOW-based times. Field names, the collection's name,
// the 60 s grace and the TTL index are the seed's. Not ported: the take-over of an unreadable
// record (_force_claim), which this workload never produces, and release, renew and waiting,
// which it does not call. It needs pipeline updates and $$NOW, so it runs on MongoDB only.
type idemkitPort struct {
	client *mongo.Client
	coll   *mongo.Collection
	cmds   *commandCounter
}

// The seed's constants.
const (
	idemkitCollection = "idemkit_records"
	idemkitGraceMs    = 60_000
)

func openIdemkit(ctx context.Context, uri, database string) (*idemkitPort, error) {
	p := &idemkitPort{cmds: newCommandCounter()}
	client, err := mongo.Connect(clientWithMonitor(p.cmds).ApplyURI(uri))
	if err != nil {
		return nil, err
	}
	p.client = client
	p.coll = client.Database(database).Collection(idemkitCollection)
	// As the seed: the TTL index, its failure not fatal.
	_, _ = p.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expire_at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)})
	return p, nil
}

// idemkitToken is the seed's secrets.token_hex(16).
func idemkitToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// idemkitClaimPipeline is the seed's claim pipeline, stage by stage.
func idemkitClaimPipeline(fingerprint string, version int, token string, leaseMs int64) bson.A {
	cond := func(field string, taken any) bson.E {
		return bson.E{Key: field, Value: bson.D{{Key: "$cond", Value: bson.A{"$__take", taken, "$" + field}}}}
	}
	add := func(ms int64) bson.D { return bson.D{{Key: "$add", Value: bson.A{"$$NOW", ms}}} }
	return bson.A{
		bson.D{{Key: "$set", Value: bson.D{{Key: "__take", Value: bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$type", Value: "$state"}}, "missing"}}},
			bson.D{{Key: "$lt", Value: bson.A{"$lease_until", "$$NOW"}}},
		}}}}}}},
		bson.D{{Key: "$set", Value: bson.D{
			{Key: "__prev_state", Value: "$state"},
			cond("state", "CLAIMED"),
			cond("fingerprint", fingerprint),
			cond("fingerprint_version", version),
			cond("claim_token", token),
			cond("claimed_at", "$$NOW"),
			cond("lease_until", add(leaseMs)),
			cond("expire_at", add(leaseMs+idemkitGraceMs)),
			cond("completed_at", nil),
			cond("response_status", nil),
			cond("response_headers", bson.D{}),
			cond("response_body", bson.Binary{Data: []byte{}}),
		}}},
		bson.D{{Key: "$unset", Value: "__take"}},
	}
}

// idemkitCompletePipeline is the seed's complete pipeline.
func idemkitCompletePipeline(status int, headers bson.D, body []byte, completedMs int64) bson.A {
	add := func(ms int64) bson.D { return bson.D{{Key: "$add", Value: bson.A{"$$NOW", ms}}} }
	return bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "state", Value: "COMPLETED"},
		{Key: "completed_at", Value: "$$NOW"},
		{Key: "lease_until", Value: add(completedMs)},
		{Key: "expire_at", Value: add(completedMs + idemkitGraceMs)},
		{Key: "response_status", Value: status},
		{Key: "response_headers", Value: headers},
		{Key: "response_body", Value: bson.Binary{Data: body}},
	}}}}
}

func (p *idemkitPort) claim(ctx context.Context, key, fingerprint string) (idemClaim, error) {
	token := idemkitToken()
	// The seed's upsert of {_id: key}, with unique.UpsertFilter's predicate: an _id-only upsert
	// has several winners on an engine that runs it as INSERT … ON CONFLICT DO UPDATE. A racer
	// refused as a duplicate claims again, against the record that now exists.
	var after bson.Raw
	var err error
	for range 8 { // a duplicate-key refusal after 8 claims in a row is returned
		after, err = p.coll.FindOneAndUpdate(ctx, unique.UpsertFilter(key),
			idemkitClaimPipeline(fingerprint, 1, token, idemLease.Milliseconds()),
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Raw()
		if !unique.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return idemClaim{}, fmt.Errorf("mongo claim failed: %w", err)
	}
	if t, _ := after.Lookup("claim_token").StringValueOK(); t == token {
		if prev, _ := after.Lookup("__prev_state").StringValueOK(); prev == "CLAIMED" {
			return idemClaim{outcome: idem.LeaseReclaimed, token: token}, nil
		}
		return idemClaim{outcome: idem.New, token: token}, nil
	}
	state, ok := after.Lookup("state").StringValueOK()
	if !ok {
		return idemClaim{}, fmt.Errorf("claim of %q found an unreadable record (its take-over is not ported)", key)
	}
	if state == "COMPLETED" {
		_, body, _ := after.Lookup("response_body").BinaryOK()
		return idemClaim{outcome: idem.AlreadyCompleted, body: body}, nil
	}
	return idemClaim{outcome: idem.AlreadyClaimed}, nil
}

func (p *idemkitPort) complete(ctx context.Context, key, token string, body []byte) (bool, error) {
	res, err := p.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: key}, {Key: "state", Value: "CLAIMED"}, {Key: "claim_token", Value: token}},
		idemkitCompletePipeline(idemStatus, bson.D{{Key: "content-type", Value: "application/json"}}, body,
			idemRetention.Milliseconds()))
	if err != nil {
		return false, fmt.Errorf("mongo complete failed: %w", err)
	}
	return res.MatchedCount == 1, nil
}

func (p *idemkitPort) collection() string      { return idemkitCollection }
func (p *idemkitPort) commands() commandCounts { return p.cmds.snapshot() }
func (p *idemkitPort) close(ctx context.Context) error {
	return p.client.Disconnect(ctx)
}

// clientWithMonitor returns client options that count every command in cmds.
func clientWithMonitor(cmds *commandCounter) *options.ClientOptions {
	return options.Client().SetMonitor(cmds.monitor())
}
