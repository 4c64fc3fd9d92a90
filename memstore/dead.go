package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

var _ execstore.DeadCounting = (*Store)(nil)

// timerFail is what the store keeps of a timer's failed deliveries: the fire time they
// failed at, as stored, and the attempts.
type timerFail struct {
	at       float64
	attempts execstore.Attempts
}

// timerAttempts are the attempts recorded of the timer at path firing at at.
func (r *record) timerAttempts(path string, at float64) execstore.Attempts {
	if f, ok := r.timerFails[path]; ok && f.at == at {
		return f.attempts
	}
	return execstore.Attempts{}
}

// record adds one failure to a.
func addFailure(a execstore.Attempts, f execstore.Failure) execstore.Attempts {
	return execstore.Attempts{Count: a.Count + 1, LastError: contract.FailureText(f.Error), LastAt: f.At.UTC().Truncate(time.Millisecond)}
}

// find returns the index of entry seq of source, -1 when it is not pending.
func (q *relayQueue[T]) find(source string, seq int64) int {
	i := sort.Search(len(q.entries), func(i int) bool { return q.entries[i].seq >= seq })
	if i < len(q.entries) && q.entries[i].seq == seq && q.entries[i].source == source {
		return i
	}
	return -1
}

// restore puts e back among the pending entries, in seq order.
func (q *relayQueue[T]) restore(e queued[T]) {
	i := sort.Search(len(q.entries), func(i int) bool { return q.entries[i].seq >= e.seq })
	q.entries = slices.Insert(q.entries, i, e)
}

// Fail records one failed delivery of the pending item ref, and with f.Dead, or once the
// attempts reach a positive f.MaxAttempts, moves it to the dead items, under the store's
// write lock: seen whole or not at all, and counted from the attempts as they stand, so
// concurrent calls never record more than f.MaxAttempts.
func (s *Store) Fail(ctx context.Context, ref execstore.ItemRef, f execstore.Failure) (execstore.Attempts, bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return execstore.Attempts{}, false, err
	}
	if err := contract.ValidateFailure(f); err != nil {
		return execstore.Attempts{}, false, err
	}
	if err := s.lock(ctx); err != nil {
		return execstore.Attempts{}, false, err
	}
	defer s.mu.Unlock()
	ref = contract.NormalRef(ref)
	dead := execstore.DeadItem{ItemRef: ref, DeadAt: f.At.UTC().Truncate(time.Millisecond)}
	var a execstore.Attempts
	switch ref.Kind {
	case execstore.OutboxItem:
		i := s.outbox.find(ref.ExecutionID, ref.Seq)
		if i < 0 {
			return execstore.Attempts{}, false, nil
		}
		e := &s.outbox.entries[i]
		a = addFailure(e.attempts, f)
		if !contract.Dies(f, a.Count) {
			e.attempts = a
			return a, true, nil
		}
		dead.TargetID, dead.Event, dead.Version, dead.CommittedAt = e.item.targetID, cloneBytes(e.item.event), e.item.version, e.item.at
		s.outbox.entries = slices.Delete(s.outbox.entries, i, i+1)
	case execstore.SpawnItem:
		i := s.spawns.find(ref.ExecutionID, ref.Seq)
		if i < 0 {
			return execstore.Attempts{}, false, nil
		}
		e := &s.spawns.entries[i]
		a = addFailure(e.attempts, f)
		if !contract.Dies(f, a.Count) {
			e.attempts = a
			return a, true, nil
		}
		m, err := contract.DecodeMap(e.item.context)
		if err != nil {
			return execstore.Attempts{}, false, err // never: the store encoded it
		}
		dead.ChildID, dead.RootPath, dead.Context, dead.CommittedAt = e.item.childID, e.item.rootPath, m, e.item.at
		s.spawns.entries = slices.Delete(s.spawns.entries, i, i+1)
	case execstore.TimerItem:
		r := s.execs[ref.ExecutionID]
		at := contract.StoredTime(ref.FireAt)
		if r == nil || r.timers[ref.Path] != at {
			return execstore.Attempts{}, false, nil
		}
		if _, ok := r.timers[ref.Path]; !ok {
			return execstore.Attempts{}, false, nil
		}
		a = addFailure(r.timerAttempts(ref.Path, at), f)
		if !contract.Dies(f, a.Count) {
			if r.timerFails == nil {
				r.timerFails = map[string]timerFail{}
			}
			r.timerFails[ref.Path] = timerFail{at: at, attempts: a}
			return a, true, nil
		}
		dead.Version = r.timerVersions[ref.Path]
		delete(r.timers, ref.Path)
		delete(r.timerVersions, ref.Path)
		delete(r.timerFails, ref.Path)
	}
	dead.Attempts = a
	s.dead[contract.KeyOf(dead.ItemRef)] = dead
	return a, true, nil
}

// ListDead returns one page of dead items matching q, by execution id, kind, then seq or
// path. It sorts every dead item of the store.
func (s *Store) ListDead(ctx context.Context, q execstore.DeadQuery) (execstore.DeadPage, error) {
	if err := contract.ValidateDeadQuery(&q); err != nil {
		return execstore.DeadPage{}, err
	}
	after, _ := contract.DecodeDeadCursor(q.Cursor)
	if err := s.rlock(ctx); err != nil {
		return execstore.DeadPage{}, err
	}
	defer s.mu.RUnlock()
	var keys []contract.DeadKey
	for k := range s.dead {
		if q.ExecutionID != "" && k.ExecutionID != q.ExecutionID || len(q.Kinds) > 0 && !slices.Contains(q.Kinds, k.Kind) {
			continue
		}
		if q.Cursor != "" && k.Compare(after) <= 0 {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, contract.DeadKey.Compare)
	var page execstore.DeadPage
	for i, k := range keys {
		if i == q.Limit {
			page.NextCursor = contract.EncodeDeadCursor(keys[i-1])
			break
		}
		page.Items = append(page.Items, cloneDead(s.dead[k]))
	}
	return page, nil
}

// cloneDead returns a copy of d the caller may keep and change.
func cloneDead(d execstore.DeadItem) execstore.DeadItem {
	if d.Event != nil {
		d.Event = cloneBytes(d.Event)
	}
	if d.Context != nil {
		b, err := contract.EncodeMap(d.Context)
		if err == nil {
			d.Context, _ = contract.DecodeMap(b)
		}
	}
	return d
}

// CountDead returns the number of dead items of each kind.
func (s *Store) CountDead(ctx context.Context) (map[execstore.ItemKind]int64, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := map[execstore.ItemKind]int64{}
	for k := range s.dead {
		out[k.Kind]++
	}
	return out, nil
}

// CountDeadIn returns the number of dead items in each of partitions that holds any.
func (s *Store) CountDeadIn(ctx context.Context, partitions []int) (map[int]int64, error) {
	in, err := s.checkScan(partitions, 0)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	if in == nil {
		return out, nil
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	for _, d := range s.dead {
		if in(d.ExecutionID) {
			out[execstore.PartitionOf(d.ExecutionID, s.partitions)]++
		}
	}
	return out, nil
}

// Revive puts the dead item ref back to pending with no attempts, and moves its execution's
// version on by one, under the store's write lock: seen whole or not at all.
func (s *Store) Revive(ctx context.Context, ref execstore.ItemRef) (bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	key := contract.KeyOf(ref)
	d, ok := s.dead[key]
	if !ok {
		return false, nil
	}
	switch ref.Kind {
	case execstore.OutboxItem:
		s.outbox.restore(queued[outboxItem]{seq: d.Seq, source: d.ExecutionID,
			item: outboxItem{version: d.Version, at: d.CommittedAt, targetID: d.TargetID, event: cloneBytes(d.Event)}})
	case execstore.SpawnItem:
		b, err := contract.EncodeMap(d.Context)
		if err != nil {
			return false, err // never: it was decoded from what the store encoded
		}
		s.spawns.restore(queued[spawnItem]{seq: d.Seq, source: d.ExecutionID,
			item: spawnItem{childID: d.ChildID, rootPath: d.RootPath, context: b, at: d.CommittedAt}})
	case execstore.TimerItem:
		r := s.execs[d.ExecutionID]
		if r == nil {
			return false, fmt.Errorf("%w: execution %q of dead timer %q is gone", execstore.ErrNotFound, d.ExecutionID, d.Path)
		}
		if at, ok := r.timers[d.Path]; ok {
			found, _ := contract.TimeFromStored(at)
			return false, fmt.Errorf("%w: dead timer %q of execution %q: the path holds a timer firing at %s now",
				execstore.ErrConflict, d.Path, d.ExecutionID, found.Format("2006-01-02T15:04:05.999999999Z07:00"))
		}
		r.timers[d.Path] = contract.StoredTime(d.FireAt)
		if d.Version > 0 {
			r.timerVersions[d.Path] = d.Version
		}
	}
	if r := s.execs[d.ExecutionID]; r != nil {
		r.exe.Version++ // the item is pending again: a relay that knew the version scans
	}
	delete(s.dead, key)
	return true, nil
}

// Discard drops the dead item ref for good, under the store's write lock.
func (s *Store) Discard(ctx context.Context, ref execstore.ItemRef) (bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	key := contract.KeyOf(ref)
	if _, ok := s.dead[key]; !ok {
		return false, nil
	}
	delete(s.dead, key)
	return true, nil
}
