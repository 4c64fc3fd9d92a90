package ops

import (
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/server"
)

// CommitPlan is the one write a commit issues on ExecutionsCollection: an updateOne of Filter
// with Update when the execution exists (Expected > 0), an insertOne of Insert when it is
// being created (Expected 0). The update won when it matched one document; the insert won
// when it was not refused as a duplicate key. Either is a single-document write, so a caller
// may also run it inside a multi-document transaction of its own, beside its own documents.
// Update's first element is its $set.
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
	// Acked are the seqs of the execution's outbox entries the update removes, each guarded
	// by the filter as present (Seqs.Acked), and Fired the fired timers it removes, each
	// guarded by the timer still firing then (Seqs.Fired). A plan that matches nothing at
	// the version it expects may have lost only to one of them being gone already: build it
	// again without.
	Acked     []int64
	Fired     []FiredRef
	TraceNext int64 // the execution's trace_next after the commit
	Token     int64 // the commit_token it stamps; 0 for none (see SetToken)
	Bytes     int   // about how many bytes the write carries
}

// Seqs are the seqs a commit's outbox entries and spawn intents get, in emit/spawn order,
// and the seqs of the execution's own outbox entries the commit removes (acks it carries).
type Seqs struct {
	Outbox []int64
	Spawns []int64
	// Acked are entries of the execution's outbox whose delivery was acknowledged: the
	// commit removes each and lowers outbox_n by one for each, guarded by each entry being
	// there (a commit whose acked entry is gone matches nothing: see CommitPlan.Acked).
	Acked []int64
	// Fired are due timers of the execution that fired: the commit removes each, guarded by
	// it still firing at its fire time and, with a Version, still being that arming (a
	// commit that finds one gone or re-armed, even to the same fire time, matches nothing). The commit must have no timer op on their paths (a re-arm or cancel in the
	// commit is the timer's fate instead), and no two may share a path.
	Fired []FiredRef
	// At is when the commit is made, as its outbox entries, spawn intents and trace step
	// record it (execstore.OutboxEntry.CommittedAt, TraceDoc.At) and the document's
	// FieldUpdatedAt (and FieldCreatedAt, when it creates the execution); the zero time takes
	// Build's reading of the clock. Take it from CommitTime.
	At time.Time
}

// CommitTime is the clock's reading as a commit records it: UTC, to the millisecond, as BSON
// keeps a date.
func CommitTime() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// FiredRef names a fired timer a commit removes (Seqs.Fired).
type FiredRef struct {
	Path   string
	FireAt time.Time
	// Version is the timer's arming (execstore.DueTimer.Version); 0 matches it by path and
	// fire time alone.
	Version int64
}

// PreparedCommit is a commit with everything worked out that does not depend on its seqs or
// on the execution's trace index: the encoded spawn contexts and trace step, the folded timer
// ops, and its share of the bound on the encoded size. PrepareCommit runs before any seq is
// taken, so a commit that cannot fit in a document is refused before any I/O at all.
type PreparedCommit struct {
	c        *execstore.Commit
	contexts [][]byte // the spawns' encoded contexts
	step     []byte   // the encoded trace step; nil for none
	timers   bson.D   // {EncodeKey(path): fire_at}
	cancels  []string // encoded keys
	bytes    int      // the commit's part of CommitPlan.Bytes
}

// PrepareCommit prepares the commit of c on exe. They must be valid input to a Store's
// Commit: a store refuses anything else with ErrInvalid before it prepares a commit.
// PrepareCommit refuses with ErrInvalid a commit whose write would be past MongoDB's document
// limit with any seqs it could be given (they are measured at their longest).
func PrepareCommit(l Layout, exe *execstore.Execution, c *execstore.Commit) (*PreparedCommit, error) {
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
		pc.bytes += sizeTimer + 2*len(t.Key)
	}
	for _, k := range pc.cancels {
		pc.bytes += sizeTimer + 2*len(k)
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
		if _, err := pc.Build(l, exe, longest); err != nil {
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
// would be past MongoDB's document limit as this package writes it. It is for a store that
// keeps the commit another way (package memstore) and must refuse the same input. contexts
// and step are c's spawn contexts and trace step, each encoded as a BSON document (nil as the
// empty one). It costs some arithmetic unless the commit is near the limit.
func CheckCommitSize(exe *execstore.Execution, c *execstore.Commit, contexts [][]byte, step []byte) error {
	n := execBytes(exe) + payloadBytes(c, contexts, step)
	for _, t := range c.Timers {
		n += sizeTimer + 2*len(EncodeKey(t.Path))
	}
	if n <= execstore.MaxDocumentBytes {
		return nil
	}
	_, err := PrepareCommit(Layout{Profile: server.MongoDB, TraceMax: 1}, exe, c)
	return err
}

// execBytes is the execution's part of CommitPlan.Bytes.
func execBytes(exe *execstore.Execution) int {
	return sizeBase + sizeStamps + len(exe.ID) + len(exe.DefinitionID) + len(exe.ParentID) + len(exe.Data)
}

// BuildCommit builds the commit of exe and c: PrepareCommit, then Build. exe and c must be
// valid input to a Store's Commit. seqs must hold one seq per emit and per spawn.
func BuildCommit(l Layout, exe *execstore.Execution, c *execstore.Commit, seqs Seqs) (CommitPlan, error) {
	pc, err := PrepareCommit(l, exe, c)
	if err != nil {
		return CommitPlan{}, err
	}
	return pc.Build(l, exe, seqs)
}

// Build builds the write of the prepared commit on exe (at exe's version and trace index),
// with seqs: one per emit and per spawn.
func (pc *PreparedCommit) Build(l Layout, exe *execstore.Execution, seqs Seqs) (CommitPlan, error) {
	c := pc.c
	newVersion := exe.Version + 1
	p := CommitPlan{ID: exe.ID, Expected: exe.Version, EventID: c.ProcessedEventID, OutboxSeqs: seqs.Outbox,
		TraceNext: exe.TraceNext}
	// p.Bytes bounds the encoded size of the write from above; each entry adds its own bytes
	// and a constant that exceeds what BSON adds around them.
	p.Bytes = execBytes(exe) + pc.bytes

	at := seqs.At
	if at.IsZero() {
		at = CommitTime()
	}
	outbox := make(bson.D, 0, len(c.Emits))
	for i, e := range c.Emits {
		outbox = append(outbox, bson.E{Key: strconv.FormatInt(seqs.Outbox[i], 10), Value: OutboxDoc{
			Seq: seqs.Outbox[i], Version: newVersion, TargetID: nullable(e.TargetID), Event: nonNil(e.Event), At: at}})
	}
	spawns := make(bson.D, 0, len(c.Spawns))
	for i, s := range c.Spawns {
		spawns = append(spawns, bson.E{Key: strconv.FormatInt(seqs.Spawns[i], 10), Value: SpawnDoc{
			Seq: seqs.Spawns[i], Version: newVersion, ChildID: s.ChildID, RootPath: s.RootPath, Context: pc.contexts[i], At: at}})
	}
	timers, cancels := pc.timers, pc.cancels

	var step *TraceDoc
	if pc.step != nil {
		step = &TraceDoc{Index: exe.TraceNext, Step: pc.step, At: at}
		p.TraceNext = exe.TraceNext + 1
	}

	if exe.Version == 0 {
		p.Insert = buildInsert(l, exe, c, outbox, spawns, timers, step, at)
		if exe.Status.Finished() {
			p.Insert = append(p.Insert, bson.E{Key: FieldFinishedAt, Value: at})
		}
		return p, p.checkSize()
	}

	p.Filter = bson.D{{Key: fID, Value: exe.ID}, {Key: FieldVersion, Value: exe.Version}}
	set := bson.D{
		{Key: FieldVersion, Value: newVersion},
		{Key: FieldData, Value: nonNil(exe.Data)},
		{Key: FieldStatus, Value: string(exe.Status)},
		{Key: FieldDefinitionID, Value: exe.DefinitionID},
		{Key: FieldParentID, Value: nullable(exe.ParentID)},
		{Key: FieldUpdatedAt, Value: at},
	}
	if exe.Status.Finished() {
		set = append(set, bson.E{Key: FieldFinishedAt, Value: at})
	}
	var unset bson.D
	inc := bson.D{}
	for _, e := range outbox {
		set = append(set, bson.E{Key: FieldOutbox + "." + e.Key, Value: e.Value})
	}
	for _, seq := range seqs.Acked {
		key := outboxField.entryKey(seq)
		p.Filter = append(p.Filter, bson.E{Key: key, Value: bson.D{{Key: "$exists", Value: true}}})
		unset = append(unset, bson.E{Key: key, Value: ""})
	}
	p.Acked = seqs.Acked
	p.Bytes += ackedBytes * len(seqs.Acked)
	for _, f := range seqs.Fired {
		key, vkey := FieldTimers+"."+EncodeKey(f.Path), TimerVersionKey(f.Path)
		p.Filter = append(p.Filter, bson.E{Key: key, Value: contract.StoredTime(f.FireAt)})
		if f.Version > 0 {
			p.Filter = append(p.Filter, bson.E{Key: vkey, Value: f.Version})
		}
		unset = append(unset, bson.E{Key: key, Value: ""}, bson.E{Key: vkey, Value: ""})
		p.Bytes += 2*ackedBytes + 2*len(key) + 2*len(vkey)
	}
	p.Fired = seqs.Fired
	if n := len(outbox) - len(seqs.Acked); n != 0 {
		inc = append(inc, bson.E{Key: fOutboxN, Value: int64(n)})
	}
	for _, e := range spawns {
		set = append(set, bson.E{Key: FieldSpawns + "." + e.Key, Value: e.Value})
	}
	if len(spawns) > 0 {
		inc = append(inc, bson.E{Key: fSpawnsN, Value: int64(len(spawns))})
	}
	for _, t := range timers {
		set = append(set, bson.E{Key: FieldTimers + "." + t.Key, Value: t.Value},
			bson.E{Key: FieldTimerVersions + "." + t.Key, Value: newVersion}) // this arming, even at the fire time it had
	}
	for _, k := range cancels {
		unset = append(unset, bson.E{Key: FieldTimers + "." + k, Value: ""}, bson.E{Key: FieldTimerVersions + "." + k, Value: ""})
	}
	update := bson.D{}
	if at, ok := earliest(timers); ok {
		update = append(update, bson.E{Key: "$min", Value: bson.D{{Key: FieldTimerMin, Value: at}}})
	}
	var push bson.D
	if step != nil {
		p.Filter = append(p.Filter, bson.E{Key: FieldTraceNext, Value: exe.TraceNext}, traceShapeGuard(l))
		p.Traced = true
		set = append(set, bson.E{Key: FieldTraceNext, Value: p.TraceNext})
		ringSet, ringUnset, ringPush := traceRing(l, *step)
		set = append(set, ringSet...)
		unset = append(unset, ringUnset...)
		push = ringPush
	}
	p.Filter = append(p.Filter, dedupeGuard(l, c.ProcessedEventID)...)
	if dset, _ := dedupeUpdate(l, newVersion, c.ProcessedEventID); len(dset) > 0 {
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
	if _, add := dedupeUpdate(l, newVersion, c.ProcessedEventID); len(add) > 0 {
		update = append(update, bson.E{Key: "$addToSet", Value: add})
	}
	p.Update = update
	return p, p.checkSize()
}

// SetToken makes the commit stamp the document with token (FieldCommitToken), so that a
// group commit can tell afterwards whether this commit is the one that wrote the version it
// created. It does nothing to an insert or for token 0.
func (p *CommitPlan) SetToken(token int64) {
	if p.Update == nil || token == 0 {
		return
	}
	set := p.Update[0].Value.(bson.D)
	p.Update[0].Value = append(set, bson.E{Key: FieldCommitToken, Value: token})
	p.Token = token
}

// ackedBytes bounds what one acked entry adds to an update: its key in the filter, with
// {$exists: true}, and in $unset.
const ackedBytes = 96

// Constants of the size bound: what BSON adds around an entry's own bytes, rounded up. An
// element is a type byte, its key and a NUL, then its value; a string or binary value adds a
// length and a byte; a sub-document adds a length and a NUL.
const (
	// sizeBase covers the document's fixed fields (version, status, counts, trace_next,
	// timer_min, partition, commit_token, the empty dedupe arrays, …), the update operators' own
	// headers and the filter-free insert's framing.
	sizeBase = 512
	// sizeStamps covers the commit's times: created_at and updated_at, each a type byte, its
	// key, a NUL and an 8-byte date, and finished_at likewise.
	sizeStamps = 3 * (1 + len(FieldFinishedAt) + 1 + 8)
	// sizeProcessed covers the dedupe mark's element ($addToSet, or a generation's array).
	sizeProcessed = 48
	// sizeEmit covers "outbox.<seq>" and an outbox entry's fields (seq, v, target_id, event,
	// at).
	sizeEmit = 128
	// sizeSpawn covers "spawns.<seq>" and a spawn entry's fields.
	sizeSpawn = 160
	// sizeTimer covers "timers." and a fire time (or the "" of a cancel), and "timer_v." and
	// a version (or a ""), besides the key twice.
	sizeTimer = 64
	// sizeTrace covers a trace step's index, its time ("at") and framing, and $push's $each
	// and $slice.
	sizeTrace = 128 + 1 + len("at") + 1 + 8
	// tokenBytes is the encoded commit_token element SetToken adds to an update.
	tokenBytes = 1 + len(FieldCommitToken) + 1 + 8
)

// checkSize refuses, before any I/O, a write that MongoDB would refuse for its size: an
// insert whose document, or an update whose update document, is past MaxDocumentBytes. Bytes
// bounds the encoded size from above, so the write is encoded here to be measured only when
// the bound is past the limit. (An update that is small itself but would grow the stored
// document past the limit is refused by the server, with a code the store reports as
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

func buildInsert(l Layout, exe *execstore.Execution, c *execstore.Commit, outbox, spawns, timers bson.D,
	step *TraceDoc, at time.Time) bson.D {
	var trace any
	if l.Profile == server.FerretDB {
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
	// The times first after the _id: a listing sorted by one reads it from every document it
	// sorts, and a field near the start of a document is found sooner (on DocumentDB at
	// 100,000 executions, the listing sorted by updated_at took 401 ms median with the times
	// here, 483 ms with them at the end; docs/performance.md). A commit's $set of updated_at
	// keeps its place.
	doc := bson.D{
		{Key: fID, Value: exe.ID},
		{Key: FieldCreatedAt, Value: at},
		{Key: FieldUpdatedAt, Value: at},
		{Key: FieldDefinitionID, Value: exe.DefinitionID},
		{Key: FieldStatus, Value: string(exe.Status)},
		{Key: FieldParentID, Value: nullable(exe.ParentID)},
		{Key: FieldVersion, Value: int64(1)},
		{Key: FieldData, Value: nonNil(exe.Data)},
		{Key: FieldOutbox, Value: outbox},
		{Key: fOutboxN, Value: int64(len(outbox))},
		{Key: FieldSpawns, Value: spawns},
		{Key: fSpawnsN, Value: int64(len(spawns))},
	}
	doc = append(doc, dedupeInsert(l, c.ProcessedEventID)...)
	doc = append(doc,
		bson.E{Key: FieldTimers, Value: timers},
		bson.E{Key: FieldTrace, Value: trace},
		bson.E{Key: FieldTraceNext, Value: traceNext},
	)
	if at, ok := earliest(timers); ok {
		doc = append(doc, bson.E{Key: FieldTimerMin, Value: at})
		armed := make(bson.D, len(timers))
		for i, t := range timers {
			armed[i] = bson.E{Key: t.Key, Value: int64(1)}
		}
		doc = append(doc, bson.E{Key: FieldTimerVersions, Value: armed})
	}
	if l.Partitions > 0 {
		doc = append(doc, bson.E{Key: FieldPartition, Value: int32(execstore.PartitionOf(exe.ID, l.Partitions))})
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
// {EncodeKey(path): fire_at} and the cancels as encoded keys.
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
			cancels = append(cancels, EncodeKey(op.Path))
		} else {
			schedules = append(schedules, bson.E{Key: EncodeKey(op.Path), Value: contract.StoredTime(op.FireAt)})
		}
	}
	return schedules, cancels
}

// traceRing returns the update parts that append step to the trace ring and trim it to
// l.TraceMax steps. MongoDB: $push with $each and $slice. FerretDB accepts $slice and
// ignores it, so there the ring is a sub-document keyed by index: the step is $set under its
// index and the keys that fall out of the window are $unset. After TraceMax is lowered by more
// than traceShrinkPerWrite, older keys stay stored on FerretDB (the store's ReadTrace returns
// only the last TraceMax steps); MongoDB's $slice trims them all.
func traceRing(l Layout, step TraceDoc) (set, unset, push bson.D) {
	if l.Profile != server.FerretDB {
		push = bson.D{{Key: FieldTrace, Value: bson.D{
			{Key: "$each", Value: bson.A{step}},
			{Key: "$slice", Value: -l.TraceMax},
		}}}
		return nil, nil, push
	}
	set = bson.D{{Key: FieldTrace + "." + strconv.FormatInt(step.Index, 10), Value: step}}
	oldest := step.Index - int64(l.TraceMax) // the newest index to drop
	for i := oldest; i >= 0 && i > oldest-traceShrinkPerWrite; i-- {
		unset = append(unset, bson.E{Key: FieldTrace + "." + strconv.FormatInt(i, 10), Value: ""})
	}
	return set, unset, nil
}

// traceShrinkPerWrite is how many out-of-window trace keys one write removes on FerretDB.
const traceShrinkPerWrite = 8
