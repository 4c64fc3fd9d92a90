package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Counter names in CountersCollection: the outbox seqs and the spawn seqs come from one
// counter each, shared by every process on the database. A commit's Seqs are taken from them.
const (
	OutboxCounter = "outbox"
	SpawnCounter  = "spawn"
)

// ReserveCommand is the findAndModify (returning the document after the update) that
// reserves n seqs of counter name. The seqs are (n_after-n, n_after], where n_after is the
// returned document's field "n". It is an $inc of the existing counter document, never an
// upsert. An engine that runs an upsert of {_id} as INSERT … ON CONFLICT DO UPDATE can tell
// two racing creators that each created the counter, and so hand out one block twice. When
// it matches no document, insert CounterDocument(name), ignore a duplicate-key refusal
// (another process created it), and run it again.
func ReserveCommand(name string, n int64) (filter, update bson.D) {
	return bson.D{{Key: fID, Value: name}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: n}}}}
}

// CounterDocument is the document that creates counter name at zero; see ReserveCommand.
func CounterDocument(name string) bson.D {
	return bson.D{{Key: fID, Value: name}, {Key: "n", Value: int64(0)}}
}
