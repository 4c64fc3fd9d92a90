// Package unique is how every store of the module makes a write that hands out something
// unique — a seq block, an execution's creation, an idempotency claim, a journal claim — have
// exactly one winner on every server it accepts, not only on MongoDB.
//
// What always holds:
//   - No upsert's filter is the _id alone. MongoDB runs two racing upserts of an absent _id
//     safely (the loser's DuplicateKey is retried inside the server as an update, because the
//     filter is an equality on the unique index), but engines that run such an upsert as
//     INSERT … ON CONFLICT DO UPDATE (FerretDB 2.x on DocumentDB, Azure Cosmos DB for MongoDB
//     vCore) tell several racers "upserted", each with its own value. So a document is either
//     created by an insert, whose uniqueness is the _id index's on every engine, and then
//     changed by updates that match it (a single-document update of an existing document is
//     atomic on every engine), or upserted with UpsertFilter, whose extra predicate keeps the
//     upsert off that path: exactly one racer inserts, the others get a duplicate-key refusal
//     (IsDuplicateKey) and try again against the document that now exists.
//   - A duplicate-key refusal means nothing was written by that statement, on every engine:
//     MongoDB's 11000 family and the PostgreSQL-backed engines' "duplicate key value violates
//     unique constraint" (InternalError, code 1) alike.
package unique

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// GuardField names a field no store ever writes. UpsertFilter's predicate on it matches every
// stored document, so it changes no result; it only makes the filter more than the _id.
const GuardField = "__never_written"

// UpsertFilter is the filter of an upsert of the document id: {_id: id, __never_written:
// {$exists: false}}. It matches what {_id: id} matches, and two racing upserts of an absent id
// have one winner on every engine; a loser gets a duplicate-key refusal and retries.
func UpsertFilter(id any) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: GuardField, Value: bson.D{{Key: "$exists", Value: false}}}}
}

// codeInternalError is the code PostgreSQL-backed engines give a unique violation on some
// paths (an upsert that is not on the _id-only path), with the message below.
const codeInternalError = 1

// pgUniqueViolation is PostgreSQL's message for a unique violation (SQLSTATE 23505).
const pgUniqueViolation = "duplicate key value violates unique constraint"

// IsDuplicateKey reports whether err is a server's refusal of a write for a duplicate key:
// what mongo.IsDuplicateKeyError recognises, and a PostgreSQL-backed engine's unique violation.
func IsDuplicateKey(err error) bool {
	if err == nil {
		return false
	}
	if mongo.IsDuplicateKeyError(err) {
		return true
	}
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCodeWithMessage(codeInternalError, pgUniqueViolation)
}
