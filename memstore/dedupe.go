package memstore

import "github.com/execstore/execstore/internal/contract"

// dedupeSet is an execution's set of processed event ids, kept as the MongoDB store keeps it
// (ops/dedupe.go). Without a window every id stays in gens[0]. With a window W the two sets take
// turns by generation of W versions: the commit that creates version v records its id in
// gens[(v/W)%2], and the first commit of a generation (v%W == 0) empties that set first,
// dropping the ids of two generations ago. So the set holds the ids of at least the last W
// commits and of at most the last 2W.
type dedupeSet struct {
	gens [2]map[string]struct{}
}

// record updates the set for the commit that creates version, which processed eventID ("" for
// none), under window (0 for none).
func (d *dedupeSet) record(window, version int64, eventID string) {
	gen := 0
	if window > 0 {
		var starts bool
		if gen, starts = contract.DedupeGeneration(version, int(window)); starts {
			d.gens[gen] = nil
		}
	}
	if eventID == "" {
		return
	}
	if d.gens[gen] == nil {
		d.gens[gen] = map[string]struct{}{}
	}
	d.gens[gen][eventID] = struct{}{}
}

// holds reports whether eventID is in the set.
func (d *dedupeSet) holds(eventID string) bool {
	for _, g := range d.gens {
		if _, ok := g[eventID]; ok {
			return true
		}
	}
	return false
}
