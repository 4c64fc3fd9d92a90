package execstore_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore"
)

// PartitionOf is FNV-1a 64 of the id modulo n: these values are stored in documents, so they
// must never change.
func TestPartitionOfIsStable(t *testing.T) {
	for _, c := range []struct {
		id   string
		n    int
		want int
	}{
		{"", 64, int(14695981039346656037 % 64)},
		{"order-1", 1, 0},
		{"a", 64, int(0xaf63dc4c8601ec8c % 64)},
		{"a", 1000, int(0xaf63dc4c8601ec8c % 1000)},
		{"foobar", 64, int(0x85944171f73967e8 % 64)},
	} {
		assert.Equal(t, c.want, execstore.PartitionOf(c.id, c.n), "%q among %d", c.id, c.n)
	}
	assert.Panics(t, func() { execstore.PartitionOf("a", 0) })
}

// Ids spread over the partitions: no partition of 64 gets more than twice its share of
// 64000 sequential ids.
func TestPartitionOfSpreads(t *testing.T) {
	counts := make([]int, 64)
	for i := range 64000 {
		counts[execstore.PartitionOf("exe-"+strconv.Itoa(i), 64)]++
	}
	for p, c := range counts {
		assert.Greater(t, c, 500, "partition %d", p)
		assert.Less(t, c, 2000, "partition %d", p)
	}
}
