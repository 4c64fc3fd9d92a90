package opsrun

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/execstore/execstore/ops"
)

// Env is what an operation runs against: the collections, and the layout of the documents.
type Env struct {
	ops.Layout
	Executions *mongo.Collection
	// Primary is Executions read at the primary's latest state: local read concern, primary
	// read preference. The reads that learn what a write did (a conflict check, a group
	// commit's read-back) use it whatever the store's settings for ordinary reads; nil
	// means Executions. See PrimaryReads.
	Primary *mongo.Collection
	// Durable is Executions read at the primary's majority-committed state, to confirm a
	// write settled without an answer; nil means Primary. See DurableReads.
	Durable  *mongo.Collection
	Counters *mongo.Collection
	// Rates is the collection of the rate samples (ops.RatesCollectionOf); nil when the
	// store keeps none.
	Rates *mongo.Collection
}

// PrimaryReads returns coll as the reads that settle a write's outcome need it: they must see
// every write the primary has applied, a competitor's as well as the store's own, so they
// read with local read concern from the primary. A majority read could miss a write that is
// applied but not yet majority-committed (and report a lost commit as matching nothing, or a
// won one as lost); a secondary could lag behind both.
func PrimaryReads(coll *mongo.Collection) *mongo.Collection {
	return coll.Clone(options.Collection().
		SetReadConcern(readconcern.Local()).
		SetReadPreference(readpref.Primary()))
}

// DurableReads returns coll reading the primary's majority-committed state: what a failover
// cannot roll back.
func DurableReads(coll *mongo.Collection) *mongo.Collection {
	return coll.Clone(options.Collection().
		SetReadConcern(readconcern.Majority()).
		SetReadPreference(readpref.Primary()))
}

func (e Env) durable() *mongo.Collection {
	if e.Durable != nil {
		return e.Durable
	}
	return e.primary()
}

func (e Env) primary() *mongo.Collection {
	if e.Primary != nil {
		return e.Primary
	}
	return e.Executions
}

// Settle bounds the reads that settle a write's outcome after its answer: they may take
// Timeout from when they start, and end sooner when Parent ends (the store closing).
type Settle struct {
	Parent  context.Context
	Timeout time.Duration
}

// Start returns the context of settling reads that start now.
func (s Settle) Start() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.Parent, s.Timeout)
}
