package opsrun

import (
	"bytes"
	"cmp"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Every bulk write the store sends lists its statements in one global order: by _id, then by
// what tells apart two statements on the same document (a group commit's token; an ack's
// operation and filter). An engine that locks rows — PostgreSQL-backed servers run each
// statement of a bulk in a subtransaction of one transaction, taking each row's lock in
// statement order and holding it to the end — can then never have two bulks, of one process
// or of two, each holding a row the other waits for: every bulk takes its locks in ascending
// _id order, so a cycle of waits would need some bulk to wait for a lower _id while holding a
// higher one. (A single-statement write holds one row and cannot close a cycle.) MongoDB
// does not deadlock here, and the order costs it nothing.

// statementOrder returns the indexes 0..n-1 sorted by id(i), then by tie(i): the order in
// which a bulk write sends the statements.
func statementOrder(n int, id func(i int) string, tie func(i, j int) int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(id(a), id(b)); c != 0 {
			return c
		}
		return tie(a, b)
	})
	return order
}

// compareStatements orders two statements on one document by their operation and filter,
// which makes the order total (two equal statements are interchangeable).
func compareStatements(opA string, filterA bson.D, opB string, filterB bson.D) int {
	if c := cmp.Compare(opA, opB); c != 0 {
		return c
	}
	a, _ := bson.Marshal(filterA)
	b, _ := bson.Marshal(filterB)
	return bytes.Compare(a, b)
}
