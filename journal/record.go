package journal

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Identity names one invocation: its id, the scope it runs in and the digest of its
// request. An id is bound to its scope and digest for good: the same id with another scope
// or digest is refused (ErrBinding).
type Identity struct {
	ID     string
	Scope  string
	Digest string
}

// Fence is what every mutation names: the invocation, its owner and the revision the owner
// last read or wrote. Claim, Read and Reverify return one; every mutation returns the next.
// A fence carries the invocation's claim, so only those calls make a usable one.
type Fence struct {
	InvocationID string
	Owner        string
	Revision     int64
	claim        string // the claim's random id, bound into every ciphertext
	scope        string // the rest of the identity, bound into every ciphertext
	digest       string
}

// identity is the invocation's identity as f knows it.
func (f Fence) identity() Identity {
	return Identity{ID: f.InvocationID, Scope: f.scope, Digest: f.digest}
}

// Phase says which side of the outside operation a checkpoint captures; it is bound into
// the checkpoint's ciphertext.
type Phase string

// The phases.
const (
	// PhaseBefore: the caller's state before the operation runs, what Prepare continues from.
	PhaseBefore Phase = "before"
	// PhaseAfter: the caller's state after the operation was reconciled.
	PhaseAfter Phase = "after"
)

func (p Phase) valid() bool { return p == PhaseBefore || p == PhaseAfter }

// Outcome is how an attempt of the operation ended, as its receipt says.
type Outcome string

// The outcomes a receipt records.
const (
	// Succeeded: the outside system did it. No attempt follows.
	Succeeded Outcome = "succeeded"
	// Failed: the outside system did not do it. Another attempt may follow, unless an
	// earlier one was Unknown.
	Failed Outcome = "failed"
	// Unknown: no one knows whether the outside system did it. The prepared operation is
	// never handed out again (ErrNoReplay); a later receipt of Succeeded or Failed for the
	// same attempt, from the outside system, settles it.
	Unknown Outcome = "unknown"
)

func (o Outcome) valid() bool { return o == Succeeded || o == Failed || o == Unknown }

// The latest attempt's state besides the outcomes: none yet, or handed out without receipt.
const (
	attemptNone    = "none"
	attemptPending = "pending"
)

// Checkpoint is a decrypted checkpoint.
type Checkpoint struct {
	ID    string // random, chosen when written; Prepare names it
	Phase Phase
	State []byte
}

// Receipt is a reconciliation's record: the attempt it settles, how it ended, and the
// outside system's evidence (stored encrypted).
type Receipt struct {
	Attempt int
	Outcome Outcome
	Data    []byte
}

// Invocation is an invocation as a majority read found it, every ciphertext in it
// authenticated. The prepared operation's body is never part of it: only Dispatch hands
// it out.
type Invocation struct {
	Identity   Identity
	Owner      string
	Revision   int64
	Checkpoint *Checkpoint // nil before the first
	// PreparedFrom is the checkpoint the prepared operation continues from; "" when
	// nothing is prepared.
	PreparedFrom string
	Attempts     int    // attempts handed out so far
	Latest       string // the latest attempt's state: "none", "pending", or its Outcome
	NoReplay     bool   // an attempt ended Unknown: the operation is never handed out again
	Receipts     []Receipt
	// FinishedAt is when the invocation finished (see Finished), by the server's clock: the
	// time of the receipt that finished it. Zero when it is not finished, or when it
	// finished before the journal recorded receipt times.
	FinishedAt time.Time
	claim      string
}

// Finished reports whether the invocation is finished: no call of the journal can record
// another attempt or receipt for it. That is when its latest attempt Succeeded, or ended
// Failed after an attempt ended Unknown (no replay: Dispatch refuses it for good). A
// finished invocation takes only checkpoints. The retention deletes finished invocations
// only (see Journal.DeleteExpired).
func (inv *Invocation) Finished() bool {
	return finished(inv.Latest, inv.NoReplay)
}

// finished is Invocation.Finished on the stored flags.
func finished(latest string, noReplay bool) bool {
	return latest == string(Succeeded) || (latest == string(Failed) && noReplay)
}

// Fence returns the fence of the invocation as read.
func (inv *Invocation) Fence() Fence {
	return Fence{InvocationID: inv.Identity.ID, Owner: inv.Owner, Revision: inv.Revision, claim: inv.claim,
		scope: inv.Identity.Scope, digest: inv.Identity.Digest}
}

// document is an invocation as stored: one per invocation, _id its id. Only ids, owner,
// revision and states are in plaintext; checkpoints, the operation and receipts are
// ciphertexts bound to where they are (see boundTo).
type document struct {
	ID       string              `bson:"_id"`
	Scope    string              `bson:"scope"`
	Digest   string              `bson:"digest"`
	Owner    string              `bson:"owner"`
	Claim    string              `bson:"claim"`
	Rev      int64               `bson:"rev"`
	Ckpt     *storedCheckpoint   `bson:"ckpt,omitempty"`
	Op       *storedOperation    `bson:"op,omitempty"`
	Attempts int                 `bson:"attempts"`
	Latest   string              `bson:"latest"`
	NoReplay bool                `bson:"no_replay"`
	Receipts []storedReceiptItem `bson:"receipts,omitempty"`
	// ReceiptAt is when the latest receipt was recorded, by the server's clock
	// ($currentDate in Reconcile's write); absent while the latest attempt awaits one, and
	// before the first.
	ReceiptAt *time.Time `bson:"receipt_at,omitempty"`
}

type storedCheckpoint struct {
	ID    string `bson:"id"`
	Phase string `bson:"phase"`
	CT    []byte `bson:"ct"`
}

type storedOperation struct {
	From string `bson:"from"` // the checkpoint it continues from
	CT   []byte `bson:"ct"`
}

type storedReceiptItem struct {
	Attempt int    `bson:"attempt"`
	Outcome string `bson:"outcome"`
	CT      []byte `bson:"ct"`
}

// The document's fields, as filters and updates name them.
const (
	fID        = "_id"
	fOwner     = "owner"
	fClaim     = "claim"
	fRev       = "rev"
	fCkpt      = "ckpt"
	fCkptID    = "ckpt.id"
	fOp        = "op"
	fOpCT      = "op.ct"
	fAttempts  = "attempts"
	fLatest    = "latest"
	fNoReplay  = "no_replay"
	fReceipts  = "receipts"
	fReceiptAt = "receipt_at"
)

func (d *document) identity() Identity { return Identity{ID: d.ID, Scope: d.Scope, Digest: d.Digest} }

// fenceFilter matches the invocation only while f holds it.
func fenceFilter(f Fence) bson.D {
	return bson.D{{Key: fID, Value: f.InvocationID}, {Key: fOwner, Value: f.Owner},
		{Key: fClaim, Value: f.claim}, {Key: fRev, Value: f.Revision}}
}

// Payload kinds, bound into their ciphertexts.
const (
	kindCheckpoint = "checkpoint"
	kindOperation  = "operation"
	kindReceipt    = "receipt"
)

// boundTo is the associated data of a ciphertext: a format tag, the invocation's identity,
// its claim, the payload's kind and what places it (a checkpoint's phase and id, the
// checkpoint an operation continues from, a receipt's attempt and outcome), each
// length-prefixed so that no two bindings encode alike.
func boundTo(id Identity, claim, kind string, place ...string) []byte {
	var b []byte
	for _, s := range append([]string{"execstore/journal/v1", id.ID, id.Scope, id.Digest, claim, kind}, place...) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func checkpointBinding(id Identity, claim string, phase Phase, ckptID string) []byte {
	return boundTo(id, claim, kindCheckpoint, string(phase), ckptID)
}

func operationBinding(id Identity, claim, from string) []byte {
	return boundTo(id, claim, kindOperation, from)
}

func receiptBinding(id Identity, claim string, attempt int, o Outcome) []byte {
	return boundTo(id, claim, kindReceipt, strconv.Itoa(attempt), string(o))
}

// open authenticates and decrypts every ciphertext of d (the operation's too, whose body
// it then drops), checks the attempt flags against the receipts (checkFlags) and returns
// the invocation; anything refused is an *IntegrityError.
func (d *document) open(c Cipher) (*Invocation, error) {
	inv, _, err := d.openAll(c)
	return inv, err
}

// openAll is open that also returns the prepared operation's body (nil when nothing is
// prepared).
func (d *document) openAll(c Cipher) (*Invocation, []byte, error) {
	id := d.identity()
	inv := &Invocation{Identity: id, Owner: d.Owner, Revision: d.Rev, Attempts: d.Attempts,
		Latest: d.Latest, NoReplay: d.NoReplay, claim: d.Claim}
	if d.ReceiptAt != nil && finished(d.Latest, d.NoReplay) {
		inv.FinishedAt = d.ReceiptAt.UTC()
	}
	refused := func(what string, err error) error {
		return &IntegrityError{InvocationID: d.ID, What: what, Err: err}
	}
	if d.Ckpt != nil {
		phase := Phase(d.Ckpt.Phase)
		state, err := c.Open(d.Ckpt.CT, checkpointBinding(id, d.Claim, phase, d.Ckpt.ID))
		if err != nil {
			return nil, nil, refused(kindCheckpoint, err)
		}
		inv.Checkpoint = &Checkpoint{ID: d.Ckpt.ID, Phase: phase, State: state}
	}
	var body []byte
	if d.Op != nil {
		var err error
		if body, err = d.operation(c); err != nil {
			return nil, nil, err
		}
		inv.PreparedFrom = d.Op.From
	}
	for i, r := range d.Receipts {
		data, err := c.Open(r.CT, receiptBinding(id, d.Claim, r.Attempt, Outcome(r.Outcome)))
		if err != nil {
			return nil, nil, refused(fmt.Sprintf("receipt %d", i), err)
		}
		inv.Receipts = append(inv.Receipts, Receipt{Attempt: r.Attempt, Outcome: Outcome(r.Outcome), Data: data})
	}
	if err := d.checkFlags(inv.Receipts); err != nil {
		return nil, nil, err
	}
	return inv, body, nil
}

// operation decrypts the prepared operation's body.
func (d *document) operation(c Cipher) ([]byte, error) {
	body, err := c.Open(d.Op.CT, operationBinding(d.identity(), d.Claim, d.Op.From))
	if err != nil {
		return nil, &IntegrityError{InvocationID: d.ID, What: kindOperation, Err: err}
	}
	return body, nil
}
