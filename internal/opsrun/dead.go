package opsrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// failTries bounds the read-then-write rounds of Fail and Revive: each write is guarded by
// what its read saw, and a competing write in between (another relay's failure record) makes
// it match nothing and read again.
const failTries = 4

// pendingItem is what Fail reads of a pending item: its content, the attempts recorded, and
// a timer's stored fire time and arming version.
type pendingItem struct {
	found   bool
	entry   ops.OutboxDoc
	spawn   ops.SpawnDoc
	fireAt  float64
	version int64            // a timer's arming (0: none recorded)
	fails   ops.TimerFailDoc // a timer's, as stored (At 0: none)
}

// readPending reads the pending item ref from the primary: one find by _id projecting it.
func readPending(ctx context.Context, env Env, ref execstore.ItemRef) (pendingItem, error) {
	path := ops.PendingItemPath(ref)
	proj := bson.D{{Key: path, Value: 1}}
	if ref.Kind == execstore.TimerItem {
		proj = append(proj, bson.E{Key: ops.FieldTimerFails + "." + ops.EncodeKey(ref.Path), Value: 1},
			bson.E{Key: ops.TimerVersionKey(ref.Path), Value: 1})
	}
	raw, err := env.primary().FindOne(ctx, bson.D{{Key: fID, Value: ref.ExecutionID}}, options.FindOne().SetProjection(proj)).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return pendingItem{}, nil
	}
	if err != nil {
		return pendingItem{}, outcome.ReadFailure("fail", ref.ExecutionID, err)
	}
	var it pendingItem
	parts := strings.Split(path, ".")
	v, err := raw.LookupErr(parts...)
	if err != nil {
		return it, nil // not pending
	}
	switch ref.Kind {
	case execstore.OutboxItem:
		it.found = v.Unmarshal(&it.entry) == nil && it.entry.Seq == ref.Seq
	case execstore.SpawnItem:
		it.found = v.Unmarshal(&it.spawn) == nil && it.spawn.Seq == ref.Seq
	case execstore.TimerItem:
		at, ok := v.DoubleOK()
		it.found = ok && at == contract.StoredTime(ref.FireAt)
		it.fireAt = at
		if f, err := raw.LookupErr(ops.FieldTimerFails, ops.EncodeKey(ref.Path)); err == nil {
			_ = f.Unmarshal(&it.fails)
		}
		if v, err := raw.LookupErr(ops.FieldTimerVersions, ops.EncodeKey(ref.Path)); err == nil {
			it.version, _ = v.AsInt64OK()
		}
	}
	return it, nil
}

// attempts are the attempts recorded of it, for a timer only those of its fire time.
func (it pendingItem) attempts(k execstore.ItemKind) ops.Failures {
	switch k {
	case execstore.OutboxItem:
		return it.entry.Failures
	case execstore.SpawnItem:
		return it.spawn.Failures
	}
	if it.fails.At == it.fireAt {
		return it.fails.Failures
	}
	return ops.Failures{}
}

// Fail records one failed delivery of the pending item ref, and with f.Dead, or when the
// attempts reach a positive f.MaxAttempts, moves it to dead: a read of the item, then one
// guarded single-document update (ops.FailCommand, ops.DeadCommand), again when another write
// came in between. The update is guarded by the attempts read, so the count it writes, and
// whether it reaches f.MaxAttempts, is the count the document holds when it is applied: of
// concurrent calls one matches per count, and the others read again. So no more than
// f.MaxAttempts are recorded, and the one that reaches it moves the item.
func Fail(ctx context.Context, env Env, ref execstore.ItemRef, f execstore.Failure) (execstore.Attempts, bool, error) {
	for range failTries {
		it, err := readPending(ctx, env, ref)
		if err != nil || !it.found {
			return execstore.Attempts{}, false, err
		}
		was := it.attempts(ref.Kind)
		now := ops.Failures{Attempts: was.Attempts + 1, LastError: contract.FailureText(f.Error), LastAt: f.At.UTC().Truncate(1e6)}
		read := ops.TimerFailDoc{At: it.fails.At, Failures: it.fails.Failures}
		if ref.Kind != execstore.TimerItem {
			read = ops.TimerFailDoc{Failures: was}
		}
		var filter, update bson.D
		if contract.Dies(f, int(now.Attempts)) {
			d := ops.DeadDoc{Kind: string(ref.Kind), Failures: now, DeadAt: now.LastAt}
			switch ref.Kind {
			case execstore.OutboxItem:
				d.Seq, d.Version, d.TargetID, d.Event, d.CommittedAt = ref.Seq, it.entry.Version, it.entry.TargetID, nonNil(it.entry.Event), it.entry.At
			case execstore.SpawnItem:
				d.Seq, d.Version, d.ChildID, d.RootPath, d.Context, d.CommittedAt = ref.Seq, it.spawn.Version, it.spawn.ChildID, it.spawn.RootPath, it.spawn.Context, it.spawn.At
			case execstore.TimerItem:
				d.Path, d.FireAt, d.Version = ref.Path, it.fireAt, it.version
			}
			filter, update = ops.DeadCommand(ref, it.fireAt, read, d)
		} else {
			filter, update = ops.FailCommand(ref, it.fireAt, read, now)
		}
		res, err := env.Executions.UpdateOne(ctx, filter, update)
		if err != nil {
			return execstore.Attempts{}, false, outcome.WriteFailure("fail", ref.ExecutionID, err)
		}
		if res.MatchedCount == 1 {
			return attemptsOf(now), true, nil
		}
	}
	return execstore.Attempts{}, false, fmt.Errorf("%w: the failure of %s/%s was not recorded: %d writes in a row came in between",
		execstore.ErrRolledBack, ref.ExecutionID, ops.DeadKey(ref), failTries)
}

func attemptsOf(f ops.Failures) execstore.Attempts {
	return execstore.Attempts{Count: int(f.Attempts), LastError: f.LastError, LastAt: f.LastAt}
}

// Revive puts the dead item ref back to pending: a read of the dead item, then one guarded
// single-document update (ops.ReviveCommand). A timer whose path is armed again is a
// conflict.
func Revive(ctx context.Context, env Env, ref execstore.ItemRef) (bool, error) {
	key := ops.DeadKey(ref)
	for range failTries {
		proj := bson.D{{Key: ops.FieldDead + "." + key, Value: 1}}
		if ref.Kind == execstore.TimerItem {
			proj = append(proj, bson.E{Key: ops.PendingItemPath(ref), Value: 1}, bson.E{Key: ops.FieldTimerMin, Value: 1})
		}
		raw, err := env.primary().FindOne(ctx, bson.D{{Key: fID, Value: ref.ExecutionID}}, options.FindOne().SetProjection(proj)).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return false, nil
		}
		if err != nil {
			return false, outcome.ReadFailure("revive", ref.ExecutionID, err)
		}
		v, err := raw.LookupErr(ops.FieldDead, key)
		if err != nil {
			return false, nil
		}
		var d ops.DeadDoc
		if err := v.Unmarshal(&d); err != nil || d.Kind != string(ref.Kind) {
			return false, nil
		}
		var pending any
		switch ref.Kind {
		case execstore.OutboxItem:
			if d.Seq != ref.Seq {
				return false, nil
			}
			pending = ops.OutboxDoc{Seq: d.Seq, Version: d.Version, TargetID: d.TargetID, Event: nonNil(d.Event), At: d.CommittedAt}
		case execstore.SpawnItem:
			if d.Seq != ref.Seq {
				return false, nil
			}
			pending = ops.SpawnDoc{Seq: d.Seq, Version: d.Version, ChildID: d.ChildID, RootPath: d.RootPath, Context: d.Context, At: d.CommittedAt}
		case execstore.TimerItem:
			if d.FireAt != contract.StoredTime(ref.FireAt) {
				return false, nil
			}
			if at, err := raw.LookupErr(strings.Split(ops.PendingItemPath(ref), ".")...); err == nil {
				found, _ := contract.TimeFromStored(at.Double())
				return false, fmt.Errorf("%w: dead timer %q of execution %q: the path holds a timer firing at %s now",
					execstore.ErrConflict, ref.Path, ref.ExecutionID, found.Format("2006-01-02T15:04:05.999999999Z07:00"))
			}
		}
		var hint *float64
		if h, err := raw.LookupErr(ops.FieldTimerMin); err == nil {
			if v, ok := h.DoubleOK(); ok {
				hint = &v
			}
		}
		filter, update := ops.ReviveCommand(ref, d, pending, hint)
		res, err := env.Executions.UpdateOne(ctx, filter, update)
		if err != nil {
			return false, outcome.WriteFailure("revive", ref.ExecutionID, err)
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
	}
	return false, fmt.Errorf("%w: the revival of %s/%s: %d writes in a row came in between",
		execstore.ErrRolledBack, ref.ExecutionID, key, failTries)
}

// Discard drops the dead item ref for good: one guarded single-document update
// (ops.DiscardCommand). It reports false when ref is not dead.
func Discard(ctx context.Context, env Env, ref execstore.ItemRef) (bool, error) {
	filter, update := ops.DiscardCommand(ref, contract.StoredTime(ref.FireAt))
	res, err := env.Executions.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, outcome.WriteFailure("discard", ref.ExecutionID, err)
	}
	return res.MatchedCount == 1, nil
}

// deadEntry is one dead item read, with its place in the listing's order.
type deadEntry struct {
	key  contract.DeadKey
	item execstore.DeadItem
}

// readDead reads the dead items of the documents filter selects, by _id, until limit items
// after after are found (limit 0: all). One find projecting only FieldDead.
func readDead(ctx context.Context, env Env, filter bson.D, after contract.DeadKey, cursor bool, kinds []execstore.ItemKind, limit int) ([]deadEntry, error) {
	cur, err := env.Executions.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: ops.FieldDead, Value: 1}}).SetSort(bson.D{{Key: fID, Value: 1}}))
	if err != nil {
		return nil, outcome.ReadFailure("list dead", "", err)
	}
	defer cur.Close(ctx)
	var out []deadEntry
	for cur.Next(ctx) {
		var doc struct {
			ID   string                 `bson:"_id"`
			Dead map[string]ops.DeadDoc `bson:"dead"`
		}
		if err := cur.Decode(&doc); err != nil {
			return nil, outcome.ReadFailure("list dead", "", err)
		}
		var page []deadEntry
		for _, d := range doc.Dead {
			it, err := deadItem(doc.ID, d)
			if err != nil {
				continue // not written by this store
			}
			k := contract.KeyOf(it.ItemRef)
			if cursor && k.Compare(after) <= 0 || len(kinds) > 0 && !slices.Contains(kinds, it.Kind) {
				continue
			}
			page = append(page, deadEntry{key: k, item: it})
		}
		slices.SortFunc(page, func(a, b deadEntry) int { return a.key.Compare(b.key) })
		out = append(out, page...)
		if limit > 0 && len(out) > limit {
			break
		}
	}
	if err := cur.Err(); err != nil {
		return nil, outcome.ReadFailure("list dead", "", err)
	}
	return out, nil
}

// DeadOf returns the dead items of execution id's document doc, in the listing's order.
func DeadOf(id string, doc bson.Raw) ([]execstore.DeadItem, error) {
	var d struct {
		Dead map[string]ops.DeadDoc `bson:"dead"`
	}
	if err := bson.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var entries []deadEntry
	for _, dd := range d.Dead {
		it, err := deadItem(id, dd)
		if err != nil {
			continue // not written by this store
		}
		entries = append(entries, deadEntry{key: contract.KeyOf(it.ItemRef), item: it})
	}
	slices.SortFunc(entries, func(a, b deadEntry) int { return a.key.Compare(b.key) })
	out := make([]execstore.DeadItem, len(entries))
	for i, e := range entries {
		out[i] = e.item
	}
	return out, nil
}

// deadItem is d, a dead item of execution id, as execstore returns it.
func deadItem(id string, d ops.DeadDoc) (execstore.DeadItem, error) {
	it := execstore.DeadItem{ItemRef: execstore.ItemRef{Kind: execstore.ItemKind(d.Kind), ExecutionID: id},
		Attempts: attemptsOf(d.Failures), DeadAt: d.DeadAt, Version: d.Version, CommittedAt: utc(d.CommittedAt)}
	switch it.Kind {
	case execstore.OutboxItem:
		it.Seq, it.TargetID, it.Event = d.Seq, deref(d.TargetID), nonNil(d.Event)
	case execstore.SpawnItem:
		m, err := contract.DecodeMap(d.Context)
		if err != nil {
			return it, err
		}
		it.Seq, it.ChildID, it.RootPath, it.Context = d.Seq, d.ChildID, d.RootPath, m
	case execstore.TimerItem:
		at, ok := contract.TimeFromStored(d.FireAt)
		if !ok {
			return it, errors.New("fire time out of range")
		}
		it.Path, it.FireAt = d.Path, at
	default:
		return it, errors.New("unknown kind")
	}
	return it, nil
}

// ListDead returns one page of the dead items q selects (q checked, its defaults filled in):
// one find of the documents holding dead items, by _id.
func ListDead(ctx context.Context, env Env, q execstore.DeadQuery) (execstore.DeadPage, error) {
	after, _ := contract.DecodeDeadCursor(q.Cursor)
	entries, err := readDead(ctx, env, ops.DeadFilter(q.ExecutionID, after.ExecutionID), after, q.Cursor != "", q.Kinds, q.Limit)
	if err != nil {
		return execstore.DeadPage{}, err
	}
	var page execstore.DeadPage
	for i, e := range entries {
		if i == q.Limit {
			page.NextCursor = contract.EncodeDeadCursor(entries[i-1].key)
			break
		}
		page.Items = append(page.Items, e.item)
	}
	return page, nil
}

// CountDead counts the dead items of each kind: one find of the documents holding dead items.
func CountDead(ctx context.Context, env Env) (map[execstore.ItemKind]int64, error) {
	entries, err := readDead(ctx, env, ops.DeadFilter("", ""), contract.DeadKey{}, false, nil, 0)
	if err != nil {
		return nil, err
	}
	out := map[execstore.ItemKind]int64{}
	for _, e := range entries {
		out[e.item.Kind]++
	}
	return out, nil
}

// CountDeadIn counts the dead items of each of partitions that holds any: one aggregation
// (ops.DeadCountPipeline).
func CountDeadIn(ctx context.Context, env Env, partitions []int) (map[int]int64, error) {
	cur, err := env.Executions.Aggregate(ctx, ops.DeadCountPipeline(partitions))
	if err != nil {
		return nil, outcome.ReadFailure("count dead", "", err)
	}
	var rows []struct {
		Partition *int32 `bson:"_id"`
		Dead      int64  `bson:"dead"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, outcome.ReadFailure("count dead", "", err)
	}
	out := map[int]int64{}
	for _, r := range rows {
		var p int // the documents without a partition are partition 0's
		if r.Partition != nil {
			p = int(*r.Partition)
		}
		if r.Dead > 0 {
			out[p] += r.Dead
		}
	}
	return out, nil
}
