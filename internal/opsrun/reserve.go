package opsrun

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
)

// Reserve atomically reserves the n seqs (last-n, last] of counter name and returns last,
// by ops.ReserveCommand. Seqs are unique across every process sharing the database, on every
// server:
//
//   - The reservation is one findAndModify that increments the existing counter document and
//     returns it after the increment: a single-document update of an existing document, which
//     every engine applies atomically, so two reservations never see the same n.
//   - The counter document is created by an insert (n: 0), only when the reservation found no
//     document: the _id index lets exactly one racing insert win on every engine, and a
//     duplicate-key refusal means another process created it. Then the reservation runs again.
//
// It is never an upsert of {_id: name}: an engine that runs that as INSERT … ON CONFLICT DO
// UPDATE can tell two racing creators that each created the counter, handing out one block
// twice. In the steady state a reservation is one command; the first one of a database three.
func Reserve(ctx context.Context, env Env, name string, n int64) (int64, error) {
	filter, update := ops.ReserveCommand(name, n)
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	for range 2 {
		var doc struct {
			N int64 `bson:"n"`
		}
		err := env.Counters.FindOneAndUpdate(ctx, filter, update, after).Decode(&doc)
		if err == nil {
			return doc.N, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return 0, fmt.Errorf("execstore: reserving %d %s seqs: %w", n, name, err)
		}
		if _, err := env.Counters.InsertOne(ctx, ops.CounterDocument(name)); err != nil && !unique.IsDuplicateKey(err) {
			return 0, fmt.Errorf("execstore: creating the %s counter: %w", name, err)
		}
	}
	return 0, fmt.Errorf("execstore: reserving %d %s seqs: the counter document vanished after it was created", n, name)
}
