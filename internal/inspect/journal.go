package inspect

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/journal"
)

// journalDoc is an invocation as package journal stores it (journal/record.go): ids, owner,
// revision and attempt flags in plaintext; the checkpoint, the prepared operation and each
// receipt's evidence as ciphertexts. The claim id is not read.
type journalDoc struct {
	Scope  string `bson:"scope"`
	Digest string `bson:"digest"`
	Owner  string `bson:"owner"`
	Rev    int64  `bson:"rev"`
	Ckpt   *struct {
		ID    string `bson:"id"`
		Phase string `bson:"phase"`
		CT    []byte `bson:"ct"`
	} `bson:"ckpt"`
	Op *struct {
		From string `bson:"from"`
		CT   []byte `bson:"ct"`
	} `bson:"op"`
	Attempts int64  `bson:"attempts"`
	Latest   string `bson:"latest"`
	NoReplay bool   `bson:"no_replay"`
	Receipts []struct {
		Attempt int64  `bson:"attempt"`
		Outcome string `bson:"outcome"`
		CT      []byte `bson:"ct"`
	} `bson:"receipts"`
}

// Invocation is a journal invocation's metadata. Nothing Sealed is ever opened: a ciphertext
// shows as its size and the id of the key it names.
type Invocation struct {
	ID         string      `json:"id"`
	Scope      string      `json:"scope"`
	Digest     string      `json:"digest"`
	Owner      string      `json:"owner"`
	Revision   int64       `json:"revision"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"` // absent before the first
	Prepared   *Prepared   `json:"prepared,omitempty"`   // absent when nothing is prepared
	Attempts   int64       `json:"attempts"`             // attempts handed out
	Latest     string      `json:"latest"`               // none, pending, or the latest attempt's outcome
	NoReplay   bool        `json:"no_replay"`            // an attempt ended unknown: never handed out again
	Receipts   []Receipt   `json:"receipts"`
}

// Sealed is a ciphertext as the report shows it.
type Sealed struct {
	Bytes int    `json:"bytes"`
	KeyID string `json:"key_id,omitempty"` // absent when it is not a KeyRing ciphertext
}

func sealedOf(ct []byte) Sealed {
	id, _ := journal.KeyIDOf(ct)
	return Sealed{Bytes: len(ct), KeyID: id}
}

// Line is the ciphertext on one line.
func (s Sealed) Line() string {
	key := "no KeyRing key id"
	if s.KeyID != "" {
		key = "key " + strconv.Quote(s.KeyID)
	}
	return fmt.Sprintf("sealed, %s, %s", plural(s.Bytes, "byte", "bytes"), key)
}

// Checkpoint is an invocation's last checkpoint.
type Checkpoint struct {
	ID     string `json:"id"`
	Phase  string `json:"phase"`
	Sealed Sealed `json:"sealed"`
}

// Prepared is an invocation's prepared operation.
type Prepared struct {
	From   string `json:"from"` // the checkpoint it continues from
	Sealed Sealed `json:"sealed"`
}

// Receipt is the receipt of one attempt.
type Receipt struct {
	Attempt int64  `json:"attempt"`
	Outcome string `json:"outcome"`
	Sealed  Sealed `json:"sealed"`
}

// ReadInvocation reads one invocation's metadata from the journal's collection coll: one
// find by _id. An unknown id is a *NotFoundError.
func ReadInvocation(ctx context.Context, coll *mongo.Collection, id string) (*Invocation, error) {
	var d journalDoc
	err := coll.FindOne(ctx, bson.D{{Key: idField, Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFound("invocation", id, coll)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q from %s.%s: %w", id, coll.Database().Name(), coll.Name(), err)
	}
	r := &Invocation{ID: id, Scope: d.Scope, Digest: d.Digest, Owner: d.Owner, Revision: d.Rev,
		Attempts: d.Attempts, Latest: d.Latest, NoReplay: d.NoReplay, Receipts: []Receipt{}}
	if d.Ckpt != nil {
		r.Checkpoint = &Checkpoint{ID: d.Ckpt.ID, Phase: d.Ckpt.Phase, Sealed: sealedOf(d.Ckpt.CT)}
	}
	if d.Op != nil {
		r.Prepared = &Prepared{From: d.Op.From, Sealed: sealedOf(d.Op.CT)}
	}
	for _, rc := range d.Receipts {
		r.Receipts = append(r.Receipts, Receipt{Attempt: rc.Attempt, Outcome: rc.Outcome, Sealed: sealedOf(rc.CT)})
	}
	return r, nil
}
