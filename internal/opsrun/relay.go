package opsrun

import (
	"context"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// pendingEntries reads every entry of the relayed field (ops.FieldOutbox or ops.FieldSpawns)
// from the documents scan selects, grouped by document id. One find projecting only the
// field, hinted to the scan's index.
func pendingEntries[T any](ctx context.Context, env Env, scan ops.Scan, field, op string) (map[string][]T, error) {
	cur, err := env.Executions.Find(ctx, scan.Filter, options.Find().SetProjection(bson.D{{Key: field, Value: 1}}).SetHint(scan.Hint))
	if err != nil {
		return nil, outcome.ReadFailure(op, "", err)
	}
	defer cur.Close(ctx)
	out := make(map[string][]T)
	for cur.Next(ctx) {
		raw := cur.Current
		id, _ := raw.Lookup(fID).StringValueOK()
		sub, ok := raw.Lookup(field).DocumentOK()
		if !ok {
			continue
		}
		var entries map[string]T
		if err := bson.Unmarshal(sub, &entries); err != nil {
			return nil, outcome.ReadFailure(op, id, err)
		}
		for _, e := range entries {
			out[id] = append(out[id], e)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, outcome.ReadFailure(op, "", err)
	}
	return out, nil
}

// ordered is an entry with what relay ordering needs.
type ordered struct {
	source  string
	version int64
	seq     int64
	pos     int // index in the caller's slice
}

// relayOrder sorts entries oldest seq first while keeping every source's entries in commit
// order (version, then seq). Seqs come from per-process blocks, so across processes one
// source's seqs need not grow with its versions; each entry is ordered by the running maximum
// seq of its source up to it, which equals its own seq whenever seqs and versions agree.
func relayOrder(entries []ordered) []ordered {
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.source != b.source {
			return a.source < b.source
		}
		if a.version != b.version {
			return a.version < b.version
		}
		return a.seq < b.seq
	})
	key := make([]int64, len(entries))
	for i := range entries {
		key[i] = entries[i].seq
		if i > 0 && entries[i-1].source == entries[i].source && key[i-1] > key[i] {
			key[i] = key[i-1]
		}
	}
	idx := make([]int, len(entries))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := idx[i], idx[j]
		if key[a] != key[b] {
			return key[a] < key[b]
		}
		if entries[a].source != entries[b].source {
			return entries[a].source < entries[b].source
		}
		return a < b
	})
	out := make([]ordered, len(entries))
	for i, k := range idx {
		out[i] = entries[k]
	}
	return out
}

func limitTo[T any](s []T, limit int) []T {
	if limit > 0 && len(s) > limit {
		return s[:limit]
	}
	return s
}
