package ops_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// ErrCommitLost reports a commit whose guard matched nothing: the execution moved past the
// version the caller loaded, or the event is already in its dedupe set. Nothing was written;
// reload the execution (the store's LoadForEvent tells which) and decide again.
var ErrCommitLost = errors.New("commit lost: reload the execution")

// CommitWithInvoice issues the write of plan and inserts invoice into the collection
// invoices of db, in one multi-document transaction: both land or neither does. It needs a
// server with transactions (a MongoDB replica set or sharded cluster). The store never
// runs a transaction; this is for a caller whose business documents must move with the
// execution.
func CommitWithInvoice(ctx context.Context, client *mongo.Client, db string, plan ops.CommitPlan, invoice bson.D) error {
	sess, err := client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		executions := client.Database(db).Collection(ops.ExecutionsCollection)
		if plan.Insert != nil { // a create (version 0 → 1)
			if _, err := executions.InsertOne(ctx, plan.Insert); err != nil {
				if mongo.IsDuplicateKeyError(err) {
					return nil, ErrCommitLost // created meanwhile
				}
				return nil, err
			}
		} else {
			res, err := executions.UpdateOne(ctx, plan.Filter, plan.Update)
			if err != nil {
				return nil, err
			}
			if res.MatchedCount != 1 {
				return nil, ErrCommitLost // the transaction is aborted
			}
		}
		_, err := client.Database(db).Collection("invoices").InsertOne(ctx, invoice)
		return nil, err
	})
	return err
}

// A caller issues a commit's write itself, inside a transaction of its own, beside its own
// documents: BuildCommit returns the one write the store would send, and CommitWithInvoice
// sends it with the plain driver.
//
// The embedded server (FerretDB 1.x) has no multi-document transactions, so this example
// runs no server: it prints the commands CommitWithInvoice would send for the execution,
// and its output checks them. A commit with emits or spawns also needs their seqs, reserved
// by ReserveCommand on CountersCollection.
func Example_transaction() {
	layout := ops.Layout{Profile: server.MongoDB, TraceMax: 100}
	exe := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running,
		Version: 3, Data: []byte(`{"state":"paid"}`)}
	plan, err := ops.BuildCommit(layout, exe, &execstore.Commit{
		ProcessedEventID: "evt-7",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("Paid.Reminder", time.Date(2030, time.March, 17, 17, 46, 40, 0, time.UTC))},
	}, ops.Seqs{At: time.Date(2030, time.March, 17, 17, 40, 0, 0, time.UTC)}) // the commit's time: take ops.CommitTime()
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func(name string, d bson.D) {
		b, err := bson.MarshalExtJSON(d, false, false)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s\n", name, b)
	}
	fmt.Println("updateOne on", ops.ExecutionsCollection)
	show("filter", plan.Filter)
	show("update", plan.Update)
	fmt.Println("insert:", plan.Insert != nil) // a version-0 create has an Insert instead
	// Output:
	// updateOne on executions
	// filter: {"_id":"order-1","version":3,"processed":{"$ne":"evt-7"}}
	// update: {"$set":{"version":4,"data":{"$binary":{"base64":"eyJzdGF0ZSI6InBhaWQifQ==","subType":"00"}},"status":"RUNNING","definition_id":"checkout","parent_id":null,"updated_at":{"$date":"2030-03-17T17:40:00Z"},"timers.Paid%2EReminder":1.9E+09,"timer_v.Paid%2EReminder":4},"$min":{"timer_min":1.9E+09},"$addToSet":{"processed":"evt-7"}}
	// insert: false
}
