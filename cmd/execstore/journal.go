package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/journal"
)

// journalOptions name the invocation `journal show` prints.
type journalOptions struct {
	output
	Collection string
	ID         string
}

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

// journalReport is an invocation's metadata. Nothing sealed is ever opened: a ciphertext
// shows as its size and the id of the key it names.
type journalReport struct {
	ID         string             `json:"id"`
	Scope      string             `json:"scope"`
	Digest     string             `json:"digest"`
	Owner      string             `json:"owner"`
	Revision   int64              `json:"revision"`
	Checkpoint *journalCheckpoint `json:"checkpoint,omitempty"` // absent before the first
	Prepared   *journalPrepared   `json:"prepared,omitempty"`   // absent when nothing is prepared
	Attempts   int64              `json:"attempts"`             // attempts handed out
	Latest     string             `json:"latest"`               // none, pending, or the latest attempt's outcome
	NoReplay   bool               `json:"no_replay"`            // an attempt ended unknown: never handed out again
	Receipts   []journalReceipt   `json:"receipts"`
}

// sealed is a ciphertext as the report shows it.
type sealed struct {
	Bytes int    `json:"bytes"`
	KeyID string `json:"key_id,omitempty"` // absent when it is not a KeyRing ciphertext
}

func sealedOf(ct []byte) sealed {
	id, _ := journal.KeyIDOf(ct)
	return sealed{Bytes: len(ct), KeyID: id}
}

func (s sealed) text() string {
	key := "no KeyRing key id"
	if s.KeyID != "" {
		key = "key " + strconv.Quote(s.KeyID)
	}
	return fmt.Sprintf("sealed, %s, %s", plural(s.Bytes, "byte", "bytes"), key)
}

type journalCheckpoint struct {
	ID     string `json:"id"`
	Phase  string `json:"phase"`
	Sealed sealed `json:"sealed"`
}

type journalPrepared struct {
	From   string `json:"from"` // the checkpoint it continues from
	Sealed sealed `json:"sealed"`
}

type journalReceipt struct {
	Attempt int64  `json:"attempt"`
	Outcome string `json:"outcome"`
	Sealed  sealed `json:"sealed"`
}

// showJournal prints one invocation's metadata: one find by _id.
func showJournal(ctx context.Context, db *mongo.Database, w io.Writer, o journalOptions) error {
	coll := db.Collection(o.Collection)
	var d journalDoc
	err := coll.FindOne(ctx, bson.D{{Key: idField, Value: o.ID}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return notFound("invocation", o.ID, coll)
	}
	if err != nil {
		return fmt.Errorf("reading %q from %s.%s: %w", o.ID, db.Name(), coll.Name(), err)
	}
	r := &journalReport{ID: o.ID, Scope: d.Scope, Digest: d.Digest, Owner: d.Owner, Revision: d.Rev,
		Attempts: d.Attempts, Latest: d.Latest, NoReplay: d.NoReplay, Receipts: []journalReceipt{}}
	if d.Ckpt != nil {
		r.Checkpoint = &journalCheckpoint{ID: d.Ckpt.ID, Phase: d.Ckpt.Phase, Sealed: sealedOf(d.Ckpt.CT)}
	}
	if d.Op != nil {
		r.Prepared = &journalPrepared{From: d.Op.From, Sealed: sealedOf(d.Op.CT)}
	}
	for _, rc := range d.Receipts {
		r.Receipts = append(r.Receipts, journalReceipt{Attempt: rc.Attempt, Outcome: rc.Outcome, Sealed: sealedOf(rc.CT)})
	}
	return emit(w, o.output, r)
}

func (r *journalReport) writeText(w io.Writer) error {
	ckpt, prepared := "none", "nothing"
	if c := r.Checkpoint; c != nil {
		ckpt = fmt.Sprintf("%s, phase %s; %s", plain(c.ID), orDash(c.Phase), c.Sealed.text())
	}
	if p := r.Prepared; p != nil {
		prepared = fmt.Sprintf("from checkpoint %s; %s", plain(p.From), p.Sealed.text())
	}
	if err := pairs(w, "", [][2]string{
		{"invocation", plain(r.ID)},
		{"scope", orDash(r.Scope)},
		{"digest", orDash(r.Digest)},
		{"owner", orDash(r.Owner)},
		{"revision", strconv.FormatInt(r.Revision, 10)},
		{"checkpoint", ckpt},
		{"prepared", prepared},
		{"attempts", strconv.FormatInt(r.Attempts, 10)},
		{"latest", orDash(r.Latest)},
		{"no replay", yesNo(r.NoReplay)},
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nreceipts: %s\n", countOrNone(len(r.Receipts)))
	if len(r.Receipts) > 0 {
		rows := make([][]string, len(r.Receipts))
		for i, rc := range r.Receipts {
			rows[i] = []string{strconv.FormatInt(rc.Attempt, 10), orDash(rc.Outcome), rc.Sealed.text()}
		}
		if err := table(w, "  ", []string{"ATTEMPT", "OUTCOME", "EVIDENCE"}, rows); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "\n(sealed payloads are never opened here: sizes and key ids only)")
	return err
}
