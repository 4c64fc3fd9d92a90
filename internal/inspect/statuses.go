package inspect

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// StatusCounts are the executions of a collection by status.
type StatusCounts struct {
	Total int64 `json:"total"`
	// ByStatus has every status the stores know, at 0 when none has it, and any other status
	// stored.
	ByStatus map[string]int64 `json:"by_status"`
}

// CountStatuses counts the executions of the executions collection coll by status: one
// aggregation grouping the whole collection by its status field, which reads every document
// (an index on the status alone would serve it, and the stores create none).
func CountStatuses(ctx context.Context, coll *mongo.Collection) (*StatusCounts, error) {
	cur, err := coll.Aggregate(ctx, []bson.D{
		{{Key: "$group", Value: bson.D{{Key: idField, Value: "$" + ops.FieldStatus}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("counting the executions of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	var rows []struct {
		Status any   `bson:"_id"`
		N      int64 `bson:"n"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, fmt.Errorf("counting the executions of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	r := &StatusCounts{ByStatus: map[string]int64{}}
	for _, s := range contract.Statuses() {
		r.ByStatus[string(s)] = 0
	}
	for _, row := range rows {
		s, ok := row.Status.(string)
		if !ok {
			s = "(none)"
		}
		r.ByStatus[s] += row.N
		r.Total += row.N
	}
	return r, nil
}
