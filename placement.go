package execstore

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// placeSep separates an id from the number PlaceWith appends to it.
const placeSep = "~"

// placeTries bounds PlaceWith's search. Each number tried lands in a given partition of n
// with probability 1/n, so for MaxPartitions it fails with probability below e^-256.
const placeTries = 1 << 20

// PlaceWith returns an execution id in the partition of with among n partitions (PartitionOf)
// that begins with id: id itself when it is in that partition already, else id followed by
// "~" and the least number that puts it there ("payment~37").
//
// It is how an engine keeps the executions of a saga together: name a child with its
// parent's id, or its root's, or a key of the engine's own (a tenant, an order) as with. They
// then share a partition, hence the relay that holds it: an event one of them emits to
// another is handed over in that process's memory (package relay), with no scan, and its
// handler's load is answered by that process's snapshot cache (package aio). The default
// stays as it was: an id not placed is in PartitionOf(id, n).
//
// The price is the partition's share of the load. Every execution placed with one key is in
// one partition, delivered by one relay at a time, whatever the number of processes. Place
// with a key that has a few executions (a saga's root), not one that has most of them (a
// tenant of most of the traffic): placed with one root, the sagas of a million orders still
// spread over every partition, each saga whole in one.
//
// n is the store's number of partitions (execstore.Partitioned), fixed for its database. It
// fails with ErrInvalid, naming the argument, when id or with is not a valid id (empty, not
// UTF-8, a NUL byte), n is not in [1, MaxPartitions], or the id would be longer than
// MaxIDBytes.
func PlaceWith(id, with string, n int) (string, error) {
	for _, a := range []struct{ field, id string }{{"id", id}, {"with", with}} {
		switch {
		case a.id == "":
			return "", &InvalidError{Field: a.field, Reason: "must not be empty"}
		case !utf8.ValidString(a.id):
			return "", &InvalidError{Field: a.field, Reason: "is not valid UTF-8"}
		case strings.IndexByte(a.id, 0) >= 0:
			return "", &InvalidError{Field: a.field, Reason: "contains a NUL byte"}
		}
	}
	if n < 1 || n > MaxPartitions {
		return "", &InvalidError{Field: "n", Reason: "must be in [1, " + strconv.Itoa(MaxPartitions) + "], the store's number of partitions"}
	}
	want := PartitionOf(with, n)
	if PartitionOf(id, n) == want && len(id) <= MaxIDBytes {
		return id, nil
	}
	prefix := id + placeSep
	for k := range placeTries {
		placed := prefix + strconv.Itoa(k)
		if len(placed) > MaxIDBytes {
			break
		}
		if PartitionOf(placed, n) == want {
			return placed, nil
		}
	}
	return "", &InvalidError{Field: "id", Reason: "is too long to be placed: the placed id would be longer than " +
		strconv.Itoa(MaxIDBytes) + " bytes"}
}
