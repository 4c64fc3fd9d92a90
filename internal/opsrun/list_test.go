package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

func TestListFilter(t *testing.T) {
	q := execstore.ListQuery{DefinitionID: "d", Statuses: []execstore.Status{execstore.Running, execstore.Done}, RootsOnly: true}
	assert.Equal(t, bson.D{
		{Key: "_id", Value: bson.D{{Key: "$gt", Value: "after"}}},
		{Key: "definition_id", Value: "d"},
		{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{"RUNNING", "DONE"}}}},
		{Key: "parent_id", Value: nil},
	}, listFilter(q, "after"))
	assert.Equal(t, bson.D{}, listFilter(execstore.ListQuery{}, ""))
}
