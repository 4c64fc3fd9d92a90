package ops

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A relayed field is an embedded sub-document of entries keyed by their decimal seq, with a
// top-level count beside it: the outbox (outbox, outbox_n) and the spawn intents (spawns,
// spawns_n). Keying by seq makes an ack one $unset that removes exactly that entry on every
// server (FerretDB ignores $pull by condition), and the count lets the pending scan select
// only documents that hold entries.
type relayField struct {
	name, count string
}

var (
	outboxField = relayField{name: FieldOutbox, count: fOutboxN}
	spawnsField = relayField{name: FieldSpawns, count: fSpawnsN}
)

// PendingOutboxFilter selects the documents that hold at least one outbox entry. The entries
// are the OutboxDocs under FieldOutbox. PendingOutboxScan adds the partitions to it.
func PendingOutboxFilter() bson.D { return outboxField.pendingFilter() }

// PendingSpawnsFilter selects the documents that hold at least one spawn intent. The intents
// are the SpawnDocs under FieldSpawns. PendingSpawnsScan adds the partitions to it.
func PendingSpawnsFilter() bson.D { return spawnsField.pendingFilter() }

// AckOutboxCommand is the updateOne that removes outbox entry seq of execution sourceID and
// decrements the count, only if the entry is still there. Acking twice, or acking an unknown
// seq, matches nothing, so the command may be repeated.
func AckOutboxCommand(sourceID string, seq int64) (filter, update bson.D) {
	return outboxField.ackCommand(sourceID, seq)
}

// AckSpawnCommand is AckOutboxCommand for spawn intent seq of execution parentID.
func AckSpawnCommand(parentID string, seq int64) (filter, update bson.D) {
	return spawnsField.ackCommand(parentID, seq)
}

func (f relayField) pendingFilter() bson.D {
	return bson.D{{Key: f.count, Value: bson.D{{Key: "$gt", Value: 0}}}}
}

func (f relayField) ackCommand(id string, seq int64) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: id}, {Key: f.entryKey(seq), Value: bson.D{{Key: "$exists", Value: true}}}}
	update = bson.D{
		{Key: "$unset", Value: bson.D{{Key: f.entryKey(seq), Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: f.count, Value: int64(-1)}}},
	}
	return filter, update
}

func (f relayField) entryKey(seq int64) string { return f.name + "." + strconv.FormatInt(seq, 10) }
