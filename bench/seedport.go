package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/unique"
)

// seedTraceMax is the seed's DEFAULT_TRACE_MAX: the steps its trace ring keeps.
const seedTraceMax = 200

// seedPort is the document store this module replaces, ported as its design gives it
// (MongoStore, a synchronous store over pymongo) to Go over the bare driver, one blocking call
// per step, so that it can be measured beside the async store on the same server:
//
//   - one document per execution: _id, definition_id, version, data (the whole execution
//     serialized, its version included), outbox and spawns as arrays of entries, processed
//     as an array, timers as a sub-document keyed by the encoded path, trace as an array;
//   - seqs from a counters collection, one findOneAndUpdate ($inc, upsert, return after) per
//     commit that emits, and one more per traced step (counter "trace:<id>");
//   - a commit is one updateOne guarded by {_id, version}: $set data, version and timer
//     schedules, $unset timer cancels, $push to outbox (and trace with $slice), $addToSet
//     processed; on a miss it reads the version and, for version 0 with no document,
//     inserts the whole document;
//   - a load (find by _id projecting data) and a separate dedupe read
//     (find {_id, processed: event}) where the async store has LoadForEvent;
//   - the pending outbox and the due timers are whole-collection finds, the fire times
//     checked by the client;
//   - an ack is updateOne({"outbox.seq": seq}, {$pull: {outbox: entry}}), a timer delete
//     updateOne({_id, timers.<enc>: fire_at}, {$unset: …}).
//
// Like the aio variants, it runs on two clients, each with its own command counter: the
// handlers' (loads, dedupe reads, seq reservations, commits: the events' critical path) and
// the relay's (outbox scans and acks, timer scans and deletes, the end-of-run reads), as a
// relay and a sweeper running in processes of their own would.
//
// One change makes it work on FerretDB at all: the seed's ack pulls by condition
// ({$pull: {outbox: {seq: seq}}}), which FerretDB accepts and ignores, so this port pulls the
// exact entry as it was read (same fields, same order), which FerretDB does remove; the
// filter and the command count are the seed's. $push with $slice is sent as the seed sends
// it; FerretDB ignores the $slice, so there the trace array is not trimmed.
type seedPort struct {
	uri      string
	database string
	cmds     *commandCounter // the handlers' client
	bgCmds   *commandCounter // the relay's client
	client   *mongo.Client
	bgClient *mongo.Client
	exes     *mongo.Collection // over the handlers' client
	counters *mongo.Collection // over the handlers' client
	bgExes   *mongo.Collection // over the relay's client
	ackMiss  atomic.Int64      // acks that removed nothing
	relay    *seedRelayStore   // relayStore's, made on first use
}

func newSeedPort(uri, database string) *seedPort {
	return &seedPort{uri: uri, database: database, cmds: newCommandCounter(), bgCmds: newCommandCounter()}
}

// seedExecution is the seed's "data": the whole execution serialized, version included. The
// engine's snapshot, which must be JSON, is its context.
type seedExecution struct {
	ID           string          `json:"id"`
	DefinitionID string          `json:"definition_id"`
	Status       string          `json:"status"`
	ParentID     *string         `json:"parent_id"`
	Version      int64           `json:"version"`
	Context      json.RawMessage `json:"context"`
}

func (s *seedPort) name() string { return variantSeedPort }

func (s *seedPort) open(ctx context.Context) error {
	var err error
	if s.client, err = seedConnect(ctx, s.uri, s.cmds); err != nil {
		return err
	}
	if s.bgClient, err = seedConnect(ctx, s.uri, s.bgCmds); err != nil {
		return err
	}
	db := s.client.Database(s.database)
	s.exes, s.counters = db.Collection("executions"), db.Collection("counters")
	s.bgExes = s.bgClient.Database(s.database).Collection("executions")
	return nil
}

// seedConnect connects a client whose commands cmds counts.
func seedConnect(ctx context.Context, uri string, cmds *commandCounter) (*mongo.Client, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(cmds.monitor()))
	if err != nil {
		return nil, err
	}
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(ctx)
		return nil, err
	}
	return client, nil
}

func (s *seedPort) close(ctx context.Context) error {
	var err error
	for _, c := range []*mongo.Client{s.client, s.bgClient} {
		if c != nil {
			err = errors.Join(err, c.Disconnect(ctx))
		}
	}
	return err
}

// commands counts both clients; pathCommands the handlers' alone.
func (s *seedPort) commands() commandCounts     { return s.cmds.snapshot().plus(s.bgCmds.snapshot()) }
func (s *seedPort) pathCommands() commandCounts { return s.cmds.snapshot() }

func (s *seedPort) counts() map[string]int64 { return map[string]int64{"ack_misses": s.ackMiss.Load()} }

// seedEnc and seedDec are the seed's path encoding: "." becomes the fullwidth full stop.
func seedEnc(path string) string { return strings.ReplaceAll(path, ".", "．") }
func seedDec(key string) string  { return strings.ReplaceAll(key, "．", ".") }

// nextSeq is the seed's _next_seq: it reserves count seqs of counter name and returns the
// first. One findAndModify upsert, as in the seed, but never of the _id alone
// (unique.UpsertFilter): on an engine that runs an _id-only upsert as INSERT … ON CONFLICT DO
// UPDATE two racing creators of the counter would each be handed the first block. A racer
// refused as a duplicate reserves again from the counter that now exists.
func (s *seedPort) nextSeq(ctx context.Context, name string, count int) (int64, error) {
	for range 8 {
		var doc struct {
			N int64 `bson:"n"`
		}
		err := s.counters.FindOneAndUpdate(ctx, unique.UpsertFilter(name),
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(count)}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
		if unique.IsDuplicateKey(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("next seq %q: %w", name, err)
		}
		return doc.N - int64(count) + 1, nil
	}
	return 0, fmt.Errorf("next seq %q: refused as a duplicate 8 times in a row", name)
}

// load is the seed's load: one find by _id projecting data.
func (s *seedPort) load(ctx context.Context, id string) (*execstore.Execution, error) {
	var doc struct {
		Data string `bson:"data"`
	}
	err := s.exes.FindOne(ctx, bson.D{{Key: "_id", Value: id}},
		options.FindOne().SetProjection(bson.D{{Key: "data", Value: 1}})).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var se seedExecution
	if err := json.Unmarshal([]byte(doc.Data), &se); err != nil {
		return nil, fmt.Errorf("execution %s: data: %w", id, err)
	}
	exe := &execstore.Execution{
		ID: se.ID, DefinitionID: se.DefinitionID, Status: execstore.Status(se.Status),
		Version: se.Version, Data: []byte(se.Context),
	}
	if se.ParentID != nil {
		exe.ParentID = *se.ParentID
	}
	return exe, nil
}

// isProcessed is the seed's dedupe read: one find of {_id, processed: eventID}.
func (s *seedPort) isProcessed(ctx context.Context, id, eventID string) (bool, error) {
	err := s.exes.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "processed", Value: eventID}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, err
}

// loadForEvent is what an engine on the seed does for each event: the load, then the dedupe
// read. Two round trips, one after the other.
func (s *seedPort) loadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error) {
	exe, err := s.load(ctx, id)
	if err != nil || exe == nil {
		return nil, false, err
	}
	done, err := s.isProcessed(ctx, id, eventID)
	if err != nil {
		return nil, false, err
	}
	return exe, done, nil
}

// commit is the seed's commit: seqs first (a findAndModify for the emits, another for the
// trace index), then the {_id, version} compare-and-set update, and on a miss the version
// read and, for a new execution, the insert.
func (s *seedPort) commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) error {
	if !json.Valid(exe.Data) {
		return contract.Invalid("Execution.Data", "the seed port stores the snapshot as JSON")
	}
	outbox := bson.A{}
	if len(c.Emits) > 0 {
		base, err := s.nextSeq(ctx, "outbox", len(c.Emits))
		if err != nil {
			return err
		}
		for i, e := range c.Emits {
			var target any
			if e.TargetID != "" {
				target = e.TargetID
			}
			outbox = append(outbox, bson.D{
				{Key: "seq", Value: base + int64(i)}, {Key: "target_id", Value: target}, {Key: "event", Value: string(e.Event)}})
		}
	}
	spawns := bson.A{}
	if len(c.Spawns) > 0 {
		base, err := s.nextSeq(ctx, "spawn", len(c.Spawns))
		if err != nil {
			return err
		}
		for i, sp := range c.Spawns {
			spawns = append(spawns, bson.D{
				{Key: "seq", Value: base + int64(i)}, {Key: "parent_id", Value: exe.ID}, {Key: "child_id", Value: sp.ChildID},
				{Key: "root_path", Value: sp.RootPath}, {Key: "context", Value: sp.Context}})
		}
	}
	var step bson.D
	if c.Trace != nil {
		idx, err := s.nextSeq(ctx, "trace:"+exe.ID, 1)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(c.Trace)) {
			step = append(step, bson.E{Key: k, Value: c.Trace[k]})
		}
		step = append(step, bson.E{Key: "index", Value: idx - 1})
	}

	old := exe.Version
	next := *exe
	next.Version = old + 1
	se := seedExecution{ID: next.ID, DefinitionID: next.DefinitionID, Status: string(next.Status),
		Version: next.Version, Context: json.RawMessage(next.Data)}
	if next.ParentID != "" {
		se.ParentID = &next.ParentID
	}
	data, err := json.Marshal(se)
	if err != nil {
		return err
	}

	set := bson.D{{Key: "data", Value: string(data)}, {Key: "version", Value: next.Version}}
	var unset bson.D
	timers := bson.D{}
	for _, op := range c.Timers {
		key := "timers." + seedEnc(op.Path)
		if op.Cancel {
			unset = append(unset, bson.E{Key: key, Value: ""})
		} else {
			at := contract.StoredTime(op.FireAt) // the seed's seconds since the epoch
			set = append(set, bson.E{Key: key, Value: at})
			timers = append(timers, bson.E{Key: seedEnc(op.Path), Value: at})
		}
	}
	update := bson.D{{Key: "$set", Value: set}}
	var push bson.D
	if len(outbox) > 0 {
		push = append(push, bson.E{Key: "outbox", Value: bson.D{{Key: "$each", Value: outbox}}})
	}
	if len(spawns) > 0 {
		push = append(push, bson.E{Key: "spawns", Value: bson.D{{Key: "$each", Value: spawns}}})
	}
	if step != nil {
		push = append(push, bson.E{Key: "trace", Value: bson.D{
			{Key: "$each", Value: bson.A{step}}, {Key: "$slice", Value: -seedTraceMax}}})
	}
	if len(push) > 0 {
		update = append(update, bson.E{Key: "$push", Value: push})
	}
	if c.ProcessedEventID != "" {
		update = append(update, bson.E{Key: "$addToSet", Value: bson.D{{Key: "processed", Value: c.ProcessedEventID}}})
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}

	res, err := s.exes.UpdateOne(ctx, bson.D{{Key: "_id", Value: exe.ID}, {Key: "version", Value: old}}, update)
	if err != nil {
		return err
	}
	if res.MatchedCount == 1 {
		exe.Version = next.Version
		return nil
	}
	found, err := s.version(ctx, exe.ID)
	if err != nil {
		return err
	}
	if found == execstore.NoVersion && old == 0 {
		trace := bson.A{}
		if step != nil {
			trace = append(trace, step)
		}
		processed := bson.A{}
		if c.ProcessedEventID != "" {
			processed = append(processed, c.ProcessedEventID)
		}
		_, err := s.exes.InsertOne(ctx, bson.D{
			{Key: "_id", Value: exe.ID},
			{Key: "definition_id", Value: exe.DefinitionID},
			{Key: "version", Value: next.Version},
			{Key: "data", Value: string(data)},
			{Key: "outbox", Value: outbox},
			{Key: "spawns", Value: spawns},
			{Key: "trace", Value: trace},
			{Key: "processed", Value: processed},
			{Key: "timers", Value: timers},
		})
		if err == nil {
			exe.Version = next.Version
			return nil
		}
		if !unique.IsDuplicateKey(err) {
			return err
		}
		if found, err = s.version(ctx, exe.ID); err != nil {
			return err
		}
	}
	return &execstore.ConflictError{ExecutionID: exe.ID, Expected: old, Found: found}
}

// version reads the stored version of id, or execstore.NoVersion. One find.
func (s *seedPort) version(ctx context.Context, id string) (int64, error) {
	var doc struct {
		Version int64 `bson:"version"`
	}
	err := s.exes.FindOne(ctx, bson.D{{Key: "_id", Value: id}},
		options.FindOne().SetProjection(bson.D{{Key: "version", Value: 1}})).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return execstore.NoVersion, nil
	}
	return doc.Version, err
}

// pendingOutbox is the seed's pending_outbox: every document whose outbox is non-empty,
// projecting the outbox, entries sorted by seq. The seed takes no limit; the limit is applied
// here after the scan, which costs the same commands.
func (s *seedPort) pendingOutbox(ctx context.Context, limit int) ([]pendingEntry, error) {
	cur, err := s.bgExes.Find(ctx,
		bson.D{{Key: "outbox", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$ne", Value: bson.A{}}}}},
		options.Find().SetProjection(bson.D{{Key: "outbox", Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var out []pendingEntry
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").StringValueOK()
		arr, ok := cur.Current.Lookup("outbox").ArrayOK()
		if !ok {
			continue
		}
		vals, err := arr.Values()
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			raw, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("execution %s: an outbox entry is not a document", id)
			}
			var e struct {
				Seq      int64   `bson:"seq"`
				TargetID *string `bson:"target_id"`
				Event    string  `bson:"event"`
			}
			if err := bson.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("execution %s: outbox entry: %w", id, err)
			}
			entry := pendingEntry{
				OutboxEntry: execstore.OutboxEntry{Seq: e.Seq, SourceID: id, Event: []byte(e.Event)},
				stored:      slices.Clone(raw),
			}
			if e.TargetID != nil {
				entry.TargetID = *e.TargetID
			}
			out = append(out, entry)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ackOutbox is the seed's ack_outbox with the exact entry pulled (see seedPort). One update.
func (s *seedPort) ackOutbox(ctx context.Context, e pendingEntry) error {
	res, err := s.bgExes.UpdateOne(ctx, bson.D{{Key: "outbox.seq", Value: e.Seq}},
		bson.D{{Key: "$pull", Value: bson.D{{Key: "outbox", Value: e.stored}}}})
	if err != nil {
		return err
	}
	if res.ModifiedCount == 0 {
		s.ackMiss.Add(1)
	}
	return nil
}

// dueTimers is the seed's due_timers: every document whose timers are non-empty, projecting
// the timers, each fire time checked here, sorted by fire time. The limit is applied after
// the scan, as in pendingOutbox.
func (s *seedPort) dueTimers(ctx context.Context, now time.Time, limit int) ([]execstore.DueTimer, error) {
	cur, err := s.bgExes.Find(ctx,
		bson.D{{Key: "timers", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$ne", Value: bson.D{}}}}},
		options.Find().SetProjection(bson.D{{Key: "timers", Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var out []execstore.DueTimer
	for cur.Next(ctx) {
		var doc struct {
			ID     string             `bson:"_id"`
			Timers map[string]float64 `bson:"timers"`
		}
		if err := cur.Decode(&doc); err != nil {
			return nil, err
		}
		for enc, at := range doc.Timers {
			if fireAt, ok := contract.TimeFromStored(at); ok && !fireAt.After(now) {
				out = append(out, execstore.DueTimer{ExecutionID: doc.ID, Path: seedDec(enc), FireAt: fireAt})
			}
		}
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	contract.SortDueTimers(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// deleteTimer is the seed's delete_timer, guarded on the stored fire time. One update.
func (s *seedPort) deleteTimer(ctx context.Context, t execstore.DueTimer) (bool, error) {
	key := "timers." + seedEnc(t.Path)
	res, err := s.bgExes.UpdateOne(ctx, bson.D{{Key: "_id", Value: t.ExecutionID}, {Key: key, Value: contract.StoredTime(t.FireAt)}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: key, Value: ""}}}})
	if err != nil {
		return false, err
	}
	return res.MatchedCount == 1, nil
}

// relayStore is the seed port's relay store: its pending_outbox, ack_outbox, due_timers and
// delete_timer, one after the other, on its background client.
func (s *seedPort) relayStore() execstore.Store {
	if s.relay == nil {
		s.relay = newSeedRelayStore(s)
	}
	return s.relay
}

// final reads every document whole: its version, its data (whose own version must agree),
// the trace steps it holds (indexes strictly increasing), then the pending outbox and the
// timers due by horizon with the seed's own scans.
func (s *seedPort) final(ctx context.Context, ids []string, horizon time.Time) (finalState, error) {
	cur, err := s.bgExes.Find(ctx, bson.D{})
	if err != nil {
		return finalState{}, err
	}
	type stored struct {
		ID      string `bson:"_id"`
		Version int64  `bson:"version"`
		Data    string `bson:"data"`
		Trace   []struct {
			Index int64 `bson:"index"`
		} `bson:"trace"`
	}
	var docs []stored
	if err := cur.All(ctx, &docs); err != nil {
		return finalState{}, err
	}
	byID := make(map[string]stored, len(docs))
	for _, d := range docs {
		byID[d.ID] = d
	}
	st := finalState{exes: make([]storedExecution, len(ids))}
	for i, id := range ids {
		d, ok := byID[id]
		if !ok {
			st.exes[i] = storedExecution{id: id}
			continue
		}
		var se seedExecution
		var problems []string
		if err := json.Unmarshal([]byte(d.Data), &se); err != nil {
			problems = append(problems, fmt.Sprintf("data: %v", err))
		} else if se.Version != d.Version || se.ID != id {
			problems = append(problems, fmt.Sprintf("data says %s at version %d, the document version %d", se.ID, se.Version, d.Version))
		}
		for k := 1; k < len(d.Trace); k++ {
			if d.Trace[k].Index <= d.Trace[k-1].Index {
				problems = append(problems, fmt.Sprintf("trace index %d after %d", d.Trace[k].Index, d.Trace[k-1].Index))
				break
			}
		}
		st.exes[i] = storedExecution{id: id, found: true, version: d.Version, data: []byte(se.Context),
			traced: int64(len(d.Trace)), problem: strings.Join(problems, "; ")}
	}
	if st.pending, err = s.pendingOutbox(ctx, 0); err != nil {
		return st, err
	}
	if st.timers, err = s.dueTimers(ctx, horizon, 0); err != nil {
		return st, err
	}
	return st, nil
}
