package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/unique"
)

// CommitPlan is the one write a commit issues: Update guarded by Filter when the execution
// exists (Version > 0), Insert when it is being created (Version 0).
type CommitPlan struct {
	ID       string
	Expected int64 // the version the caller loaded
	// Filter guards the update: {_id, version[, trace_next, trace shape][, dedupe guard]}.
	Filter     bson.D
	EventID    string // the commit's ProcessedEventID, guarded by the filter; "" for none
	Traced     bool   // the filter guards the trace index and shape
	Update     bson.D
	Insert     bson.D // the whole new document; nil unless Expected == 0
	OutboxSeqs []int64
	TraceNext  int64 // the execution's trace_next after the commit
	Token      int64 // the commit_token it stamps; 0 for none (see SetToken)
	Bytes      int   // about how many bytes the write carries
}

// Seqs are the seqs a commit's outbox entries and spawn intents get, in emit/spawn order.
type Seqs struct {
	Outbox []int64
	Spawns []int64
}

// PreparedCommit is a commit with everything worked out that does not depend on its seqs or
// on the execution's trace index: the encoded spawn contexts and trace step, the folded timer
// ops, and its share of the bound on the encoded size. PrepareCommit runs before any seq is
// taken, so a commit that cannot fit in a document is refused before any I/O at all.
type PreparedCommit struct {
	c        *execstore.Commit
	contexts [][]byte // the spawns' encoded contexts
	step     []byte   // the encoded trace step; nil for none
	timers   bson.D   // {encodeKey(path): fire_at}
	cancels  []string // encoded keys
	bytes    int      // the commit's part of CommitPlan.Bytes
}

// PrepareCommit prepares the commit of c on exe, which must have passed
// contract.ValidateCommit. It refuses with ErrInvalid a commit whose write would be past
// MongoDB's document limit with any seqs it could be given (they are measured at their
// longest).
func PrepareCommit(env Env, exe *execstore.Execution, c *execstore.Commit) (*PreparedCommit, error) {
	pc := &PreparedCommit{c: c, contexts: make([][]byte, len(c.Spawns))}
	for i, s := range c.Spawns {
		b, err := contract.EncodeMap(s.Context)
		if err != nil {
			return nil, contract.Invalid("Commit.Spawns["+strconv.Itoa(i)+"].Context", "%v", err)
		}
		pc.contexts[i] = b
	}
	if c.Trace != nil {
		b, err := contract.EncodeMap(c.Trace)
		if err != nil {
			return nil, contract.Invalid("Commit.Trace", "%v", err)
		}
		pc.step = b
	}
	pc.timers, pc.cancels = foldTimers(c.Timers)
	pc.bytes = payloadBytes(c, pc.contexts, pc.step)
	for _, t := range pc.timers {
		pc.bytes += sizeTimer + len(t.Key)
	}
	for _, k := range pc.cancels {
		pc.bytes += sizeTimer + len(k)
	}
	if pc.bytes+execBytes(exe) > execstore.MaxDocumentBytes {
		// Near the limit: build it with the longest seqs there are, and measure.
		longest := Seqs{Outbox: make([]int64, len(c.Emits)), Spawns: make([]int64, len(c.Spawns))}
		for i := range longest.Outbox {
			longest.Outbox[i] = math.MinInt64
		}
		for i := range longest.Spawns {
			longest.Spawns[i] = math.MinInt64
		}
		if _, err := pc.Build(env, exe, longest); err != nil {
			return nil, err
		}
	}
	return pc, nil
}

// payloadBytes is a commit's part of CommitPlan.Bytes but for its timer ops: its dedupe mark,
// emits, spawns (with their encoded contexts) and trace step (encoded; nil for none).
func payloadBytes(c *execstore.Commit, contexts [][]byte, step []byte) int {
	n := sizeProcessed + len(c.ProcessedEventID)
	for _, e := range c.Emits {
		n += sizeEmit + len(e.Event) + len(e.TargetID)
	}
	for i, s := range c.Spawns {
		n += sizeSpawn + len(contexts[i]) + len(s.ChildID) + len(s.RootPath)
	}
	if step != nil {
		n += sizeTrace + len(step)
	}
	return n
}

// CheckCommitSize refuses with ErrInvalid, as PrepareCommit does, a commit of c on exe that
// would be past MongoDB's document limit as this package writes it, for a store that keeps
// the commit another way (package memstore) and must refuse the same input. contexts and step
// are c's spawn contexts and trace step as contract.EncodeMap encodes them. It costs some
// arithmetic unless the commit is near the limit.
func CheckCommitSize(exe *execstore.Execution, c *execstore.Commit, contexts [][]byte, step []byte) error {
	n := execBytes(exe) + payloadBytes(c, contexts, step)
	for _, t := range c.Timers {
		n += sizeTimer + len(encodeKey(t.Path))
	}
	if n <= execstore.MaxDocumentBytes {
		return nil
	}
	_, err := PrepareCommit(Env{Profile: execstore.MongoDB, TraceMax: 1}, exe, c)
	return err
}

// execBytes is the execution's part of CommitPlan.Bytes.
func execBytes(exe *execstore.Execution) int {
	return sizeBase + len(exe.ID) + len(exe.DefinitionID) + len(exe.ParentID) + len(exe.Data)
}

// BuildCommit builds the commit of exe and c: PrepareCommit, then Build. exe and c must
// have passed contract.ValidateCommit; seqs must hold one seq per emit and per spawn.
func BuildCommit(env Env, exe *execstore.Execution, c *execstore.Commit, seqs Seqs) (CommitPlan, error) {
	pc, err := PrepareCommit(env, exe, c)
	if err != nil {
		return CommitPlan{}, err
	}
	return pc.Build(env, exe, seqs)
}

// Build builds the write of the prepared commit on exe (at exe's version and trace index),
// with seqs: one per emit and per spawn.
func (pc *PreparedCommit) Build(env Env, exe *execstore.Execution, seqs Seqs) (CommitPlan, error) {
	c := pc.c
	newVersion := exe.Version + 1
	p := CommitPlan{ID: exe.ID, Expected: exe.Version, EventID: c.ProcessedEventID, OutboxSeqs: seqs.Outbox,
		TraceNext: exe.TraceNext}
	// p.Bytes bounds the encoded size of the write from above; each entry adds its own bytes
	// and a constant that exceeds what BSON adds around them.
	p.Bytes = execBytes(exe) + pc.bytes

	outbox := make(bson.D, 0, len(c.Emits))
	for i, e := range c.Emits {
		outbox = append(outbox, bson.E{Key: strconv.FormatInt(seqs.Outbox[i], 10), Value: outboxDoc{
			Seq: seqs.Outbox[i], Version: newVersion, TargetID: nullable(e.TargetID), Event: nonNil(e.Event)}})
	}
	spawns := make(bson.D, 0, len(c.Spawns))
	for i, s := range c.Spawns {
		spawns = append(spawns, bson.E{Key: strconv.FormatInt(seqs.Spawns[i], 10), Value: spawnDoc{
			Seq: seqs.Spawns[i], Version: newVersion, ChildID: s.ChildID, RootPath: s.RootPath, Context: pc.contexts[i]}})
	}
	timers, cancels := pc.timers, pc.cancels

	var step *traceDoc
	if pc.step != nil {
		step = &traceDoc{Index: exe.TraceNext, Step: pc.step}
		p.TraceNext = exe.TraceNext + 1
	}

	if exe.Version == 0 {
		p.Insert = buildInsert(env, exe, c, outbox, spawns, timers, step)
		return p, p.checkSize()
	}

	p.Filter = bson.D{{Key: fID, Value: exe.ID}, {Key: fVersion, Value: exe.Version}}
	set := bson.D{
		{Key: fVersion, Value: newVersion},
		{Key: fData, Value: nonNil(exe.Data)},
		{Key: fStatus, Value: string(exe.Status)},
		{Key: fDefinition, Value: exe.DefinitionID},
		{Key: fParent, Value: nullable(exe.ParentID)},
	}
	var unset bson.D
	inc := bson.D{}
	for _, e := range outbox {
		set = append(set, bson.E{Key: fOutbox + "." + e.Key, Value: e.Value})
	}
	if len(outbox) > 0 {
		inc = append(inc, bson.E{Key: fOutboxN, Value: int64(len(outbox))})
	}
	for _, e := range spawns {
		set = append(set, bson.E{Key: fSpawns + "." + e.Key, Value: e.Value})
	}
	if len(spawns) > 0 {
		inc = append(inc, bson.E{Key: fSpawnsN, Value: int64(len(spawns))})
	}
	for _, t := range timers {
		set = append(set, bson.E{Key: fTimers + "." + t.Key, Value: t.Value})
	}
	for _, k := range cancels {
		unset = append(unset, bson.E{Key: fTimers + "." + k, Value: ""})
	}
	update := bson.D{}
	if at, ok := earliest(timers); ok {
		update = append(update, bson.E{Key: "$min", Value: bson.D{{Key: fTimerMin, Value: at}}})
	}
	var push bson.D
	if step != nil {
		p.Filter = append(p.Filter, bson.E{Key: fTraceNext, Value: exe.TraceNext}, traceShapeGuard(env))
		p.Traced = true
		set = append(set, bson.E{Key: fTraceNext, Value: p.TraceNext})
		ringSet, ringUnset, ringPush := traceRing(env, *step)
		set = append(set, ringSet...)
		unset = append(unset, ringUnset...)
		push = ringPush
	}
	p.Filter = append(p.Filter, dedupeGuard(env, c.ProcessedEventID)...)
	if dset, _ := dedupeUpdate(env, newVersion, c.ProcessedEventID); len(dset) > 0 {
		set = append(set, dset...)
	}
	update = append(bson.D{{Key: "$set", Value: set}}, update...)
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	if len(inc) > 0 {
		update = append(update, bson.E{Key: "$inc", Value: inc})
	}
	if len(push) > 0 {
		update = append(update, bson.E{Key: "$push", Value: push})
	}
	if _, add := dedupeUpdate(env, newVersion, c.ProcessedEventID); len(add) > 0 {
		update = append(update, bson.E{Key: "$addToSet", Value: add})
	}
	p.Update = update
	return p, p.checkSize()
}

// Constants of the size bound: what BSON adds around an entry's own bytes, rounded up. An
// element is a type byte, its key and a NUL, then its value; a string or binary value adds a
// length and a byte; a sub-document adds a length and a NUL.
const (
	// sizeBase covers the document's fixed fields (version, status, counts, trace_next,
	// timer_min, commit_token, the empty dedupe arrays, …), the update operators' own
	// headers and the filter-free insert's framing.
	sizeBase = 512
	// sizeProcessed covers the dedupe mark's element ($addToSet, or a generation's array).
	sizeProcessed = 48
	// sizeEmit covers "outbox.<seq>" and an outbox entry's fields (seq, v, target_id, event).
	sizeEmit = 128
	// sizeSpawn covers "spawns.<seq>" and a spawn entry's fields.
	sizeSpawn = 160
	// sizeTimer covers "timers." and a fire time (or the "" of a cancel), besides the key.
	sizeTimer = 32
	// sizeTrace covers a trace step's index and framing, and $push's $each and $slice.
	sizeTrace = 128
	// tokenBytes is the encoded commit_token element SetToken adds to an update.
	tokenBytes = 1 + len(fCommitToken) + 1 + 8
)

// checkSize refuses, before any I/O, a write that MongoDB would refuse for its size: an
// insert whose document, or an update whose update document, is past MaxDocumentBytes. Bytes
// bounds the encoded size from above, so the write is encoded here to be measured only when
// the bound is past the limit. (An update that is small itself but would grow the stored
// document past the limit is refused by the server, with a code writeFailure maps to
// ErrInvalid.)
func (p *CommitPlan) checkSize() error {
	if p.Bytes <= execstore.MaxDocumentBytes {
		return nil
	}
	doc, what := any(p.Update), "update"
	if p.Insert != nil {
		doc, what = p.Insert, "new document"
	}
	b, err := bson.Marshal(doc)
	if err != nil {
		return contract.Invalid("Commit", "cannot be encoded as BSON: %v", err)
	}
	n := len(b)
	if p.Insert == nil {
		n += tokenBytes // SetToken may add it later
	}
	if n > execstore.MaxDocumentBytes {
		return contract.Invalid("Commit", "the %s is %d bytes encoded, past MongoDB's %d-byte document limit",
			what, n, execstore.MaxDocumentBytes)
	}
	return nil
}

func buildInsert(env Env, exe *execstore.Execution, c *execstore.Commit, outbox, spawns, timers bson.D,
	step *traceDoc) bson.D {
	var trace any
	if env.Profile == execstore.FerretDB {
		ring := bson.D{}
		if step != nil {
			ring = append(ring, bson.E{Key: strconv.FormatInt(step.Index, 10), Value: *step})
		}
		trace = ring
	} else {
		ring := bson.A{}
		if step != nil {
			ring = append(ring, *step)
		}
		trace = ring
	}
	traceNext := exe.TraceNext
	if step != nil {
		traceNext++
	}
	doc := bson.D{
		{Key: fID, Value: exe.ID},
		{Key: fDefinition, Value: exe.DefinitionID},
		{Key: fStatus, Value: string(exe.Status)},
		{Key: fParent, Value: nullable(exe.ParentID)},
		{Key: fVersion, Value: int64(1)},
		{Key: fData, Value: nonNil(exe.Data)},
		{Key: fOutbox, Value: outbox},
		{Key: fOutboxN, Value: int64(len(outbox))},
		{Key: fSpawns, Value: spawns},
		{Key: fSpawnsN, Value: int64(len(spawns))},
	}
	doc = append(doc, dedupeInsert(env, c.ProcessedEventID)...)
	doc = append(doc,
		bson.E{Key: fTimers, Value: timers},
		bson.E{Key: fTrace, Value: trace},
		bson.E{Key: fTraceNext, Value: traceNext},
	)
	if at, ok := earliest(timers); ok {
		doc = append(doc, bson.E{Key: fTimerMin, Value: at})
	}
	return doc
}

// earliest returns the earliest fire time of schedules ({key: fire_at}).
func earliest(schedules bson.D) (float64, bool) {
	var min float64
	for i, e := range schedules {
		if at := e.Value.(float64); i == 0 || at < min {
			min = at
		}
	}
	return min, len(schedules) > 0
}

// foldTimers applies ops in order (the last op on a path wins) and returns the schedules as
// {encodeKey(path): fire_at} and the cancels as encoded keys.
func foldTimers(ops []execstore.TimerOp) (schedules bson.D, cancels []string) {
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		last[op.Path] = i
	}
	schedules = bson.D{}
	for i, op := range ops {
		if last[op.Path] != i {
			continue
		}
		if op.Cancel {
			cancels = append(cancels, encodeKey(op.Path))
		} else {
			schedules = append(schedules, bson.E{Key: encodeKey(op.Path), Value: op.FireAt})
		}
	}
	return schedules, cancels
}

// traceRing returns the update parts that append step to the trace ring and trim it to
// env.TraceMax steps. MongoDB: $push with $each and $slice. FerretDB accepts $slice and
// ignores it, so there the ring is a sub-document keyed by index: the step is $set under its
// index and the keys that fall out of the window are $unset. After TraceMax is lowered by more
// than traceShrinkPerWrite, older keys stay stored on FerretDB (ReadTrace still returns only the
// last TraceMax steps); MongoDB's $slice trims them all.
func traceRing(env Env, step traceDoc) (set, unset, push bson.D) {
	if env.Profile != execstore.FerretDB {
		push = bson.D{{Key: fTrace, Value: bson.D{
			{Key: "$each", Value: bson.A{step}},
			{Key: "$slice", Value: -env.TraceMax},
		}}}
		return nil, nil, push
	}
	set = bson.D{{Key: fTrace + "." + strconv.FormatInt(step.Index, 10), Value: step}}
	oldest := step.Index - int64(env.TraceMax) // the newest index to drop
	for i := oldest; i >= 0 && i > oldest-traceShrinkPerWrite; i-- {
		unset = append(unset, bson.E{Key: fTrace + "." + strconv.FormatInt(i, 10), Value: ""})
	}
	return set, unset, nil
}

// traceShrinkPerWrite is how many out-of-window trace keys one write removes on FerretDB.
const traceShrinkPerWrite = 8

// RunCommit executes plan. It returns nil when the commit won; when it did not, one read of
// the execution tells why, and nothing was written: a *execstore.AlreadyProcessedError when
// the plan's event is in the dedupe set (whatever the version), a *execstore.ConflictError
// when the version moved, a *TraceMovedError when only the trace index guard failed (rebuild
// with a fresh TraceNext). A write that failed is a classified write failure.
func RunCommit(ctx context.Context, env Env, plan CommitPlan) error {
	if err := ctx.Err(); err != nil {
		return err // not sent: certainly not applied
	}
	if plan.Insert != nil {
		_, err := env.Executions.InsertOne(ctx, plan.Insert)
		if err == nil {
			return nil
		}
		if !unique.IsDuplicateKey(err) {
			return outcome.WriteFailure("commit", plan.ID, err)
		}
		st, rerr := readState(ctx, env, plan.ID, plan.EventID)
		if rerr != nil {
			return rerr
		}
		if st.processed {
			return plan.alreadyProcessed(st.version)
		}
		return &execstore.ConflictError{ExecutionID: plan.ID, Expected: 0, Found: st.version}
	}
	res, err := env.Executions.UpdateOne(ctx, plan.Filter, plan.Update)
	if err != nil {
		return outcome.WriteFailure("commit", plan.ID, err)
	}
	if res.MatchedCount == 1 {
		return nil
	}
	st, err := readState(ctx, env, plan.ID, plan.EventID)
	if err != nil {
		return err
	}
	found, traceNext := st.version, st.traceNext
	if st.processed {
		return plan.alreadyProcessed(found)
	}
	if found == plan.Expected {
		if plan.Traced { // the trace guards are what missed
			if traceNext == plan.TraceNext-1 {
				// The index did not move: the trace has the other profile's shape.
				if err := repairTraceShape(ctx, env, plan.ID, traceNext); err != nil {
					return fmt.Errorf("execstore: commit of %q not applied: %w", plan.ID, err)
				}
			}
			return &TraceMovedError{TraceNext: traceNext}
		}
		return fmt.Errorf("execstore: commit of %q matched nothing at version %d, which the execution still has; nothing was written", plan.ID, found)
	}
	return &execstore.ConflictError{ExecutionID: plan.ID, Expected: plan.Expected, Found: found}
}

// TraceMovedError reports a commit that lost only its trace guards: a concurrent AppendTrace
// took the index, or the trace had the other profile's shape and has just been converted.
// Nothing was written; retry with TraceNext.
type TraceMovedError struct{ TraceNext int64 }

func (e *TraceMovedError) Error() string { return "execstore: trace index moved" }

// stateProjection is the projection of readState's find on MongoDB: version, trace_next and,
// for an event, hit: whether the dedupe set holds it (a projection expression, MongoDB 4.4+).
func stateProjection(env Env, eventID string) bson.D {
	projection := bson.D{{Key: fVersion, Value: 1}, {Key: fTraceNext, Value: 1}}
	if eventID != "" {
		projection = append(projection, bson.E{Key: "hit", Value: hitExpr(env, literal(eventID))})
	}
	return projection
}

// alreadyProcessed is the error of plan's commit refused by its dedupe guard, its event found
// in the set of the stored version.
func (p *CommitPlan) alreadyProcessed(version int64) error {
	return &execstore.AlreadyProcessedError{ExecutionID: p.ID, EventID: p.EventID, Version: version}
}

// storedState is what readState read of an execution whose commit guard missed.
type storedState struct {
	version   int64 // NoVersion when there is no document
	traceNext int64
	processed bool // the event asked about is in the dedupe set
}

// readState reads the stored version and trace_next of id, and whether eventID ("" for none)
// is in its dedupe set, as the primary has them now (Env.Primary), in one round trip: on
// MongoDB a find with the membership computed on the server ($in over the dedupe set, which
// never leaves it); on FerretDB, which has no aggregation $in, a find that also returns the
// dedupe set. Its errors are reported as the outcome of the conflict check: the commit
// itself is known not to have been applied.
func readState(ctx context.Context, env Env, id, eventID string) (storedState, error) {
	if eventID != "" && env.Profile == execstore.FerretDB {
		d, err := findWithDedupeSet(ctx, env.primary(), env, id, stateProjection(env, ""))
		switch {
		case err != nil:
			return storedState{}, outcome.ReadFailure("conflict check", id, err)
		case d == nil:
			return storedState{version: execstore.NoVersion}, nil
		}
		return storedState{version: d.Exec.Version, traceNext: d.Exec.TraceNext, processed: d.Set.holds(eventID)}, nil
	}
	var d execDoc
	err := env.primary().FindOne(ctx, bson.D{{Key: fID, Value: id}},
		options.FindOne().SetProjection(stateProjection(env, eventID))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return storedState{version: execstore.NoVersion}, nil
	}
	if err != nil {
		return storedState{}, outcome.ReadFailure("conflict check", id, err)
	}
	return storedState{version: d.Version, traceNext: d.TraceNext, processed: d.Hit}, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
