package execstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// PlaceWith returns an id that begins with the id asked for and is in the partition of
// with: the id itself when it is there already, else the id, "~" and the least number.
func TestPlaceWith(t *testing.T) {
	for _, n := range []int{1, 2, 64, 1000, execstore.MaxPartitions} {
		for i := range 50 {
			id, with := fmt.Sprintf("child-%d", i), fmt.Sprintf("root-%d", i%7)
			placed, err := execstore.PlaceWith(id, with, n)
			require.NoError(t, err)
			assert.Equal(t, execstore.PartitionOf(with, n), execstore.PartitionOf(placed, n), "%q with %q among %d", placed, with, n)
			if execstore.PartitionOf(id, n) == execstore.PartitionOf(with, n) {
				assert.Equal(t, id, placed, "an id in the partition already is kept")
				continue
			}
			suffix, ok := strings.CutPrefix(placed, id+"~")
			require.True(t, ok, "%q begins with %q~", placed, id)
			var k int
			_, err = fmt.Sscan(suffix, &k)
			require.NoError(t, err)
			for j := range k {
				assert.NotEqual(t, execstore.PartitionOf(with, n), execstore.PartitionOf(fmt.Sprintf("%s~%d", id, j), n), "the least number")
			}
		}
	}
	// The same arguments give the same id, in every process.
	a, _ := execstore.PlaceWith("payment", "order-17", 64)
	b, _ := execstore.PlaceWith("payment", "order-17", 64)
	assert.Equal(t, a, b)
}

// Bad arguments are refused with ErrInvalid, naming the argument.
func TestPlaceWithRefuses(t *testing.T) {
	long := strings.Repeat("x", execstore.MaxIDBytes)
	for _, c := range []struct {
		id, with string
		n        int
		field    string
	}{
		{"", "r", 64, "id"}, {"a", "", 64, "with"}, {"a\x00", "r", 64, "id"}, {"a", "\xff", 64, "with"},
		{"a", "r", 0, "n"}, {"a", "r", execstore.MaxPartitions + 1, "n"},
		{long + "x", "r", 1, "id"},
	} {
		_, err := execstore.PlaceWith(c.id, c.with, c.n)
		var inv *execstore.InvalidError
		require.ErrorAs(t, err, &inv, "%+v", c)
		assert.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Equal(t, c.field, inv.Field, "%+v", c)
	}
	// An id of MaxIDBytes that is not in the partition already has no room for the number.
	for i := range 100 {
		id := long[:execstore.MaxIDBytes-2] + fmt.Sprintf("%02d", i)
		if execstore.PartitionOf(id, 64) != execstore.PartitionOf("r", 64) {
			_, err := execstore.PlaceWith(id, "r", 64)
			assert.ErrorIs(t, err, execstore.ErrInvalid)
			return
		}
	}
	t.Fatal("no id of MaxIDBytes outside r's partition")
}

func ExamplePlaceWith() {
	const partitions = 64 // the store's: store.Partitions()
	child, err := execstore.PlaceWith("order-17/payment", "order-17", partitions)
	if err != nil {
		panic(err)
	}
	fmt.Println(child, execstore.PartitionOf(child, partitions) == execstore.PartitionOf("order-17", partitions))
	// Output: order-17/payment~21 true
}
