package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// A partition list is sorted and deduplicated; one out of range is refused, naming it.
func TestValidatePartitions(t *testing.T) {
	got, err := ValidatePartitions("partitions", []int{5, 1, 5, 0}, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 5}, got)
	got, err = ValidatePartitions("partitions", nil, 8)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, p := range []int{-1, 8} {
		_, err := ValidatePartitions("partitions", []int{0, p}, 8)
		var ie *execstore.InvalidError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, "partitions", ie.Field)
		assert.ErrorIs(t, err, execstore.ErrInvalid)
	}
}

// A count of partitions is 0 (the default) or in [1, MaxPartitions].
func TestValidatePartitionCount(t *testing.T) {
	for _, n := range []int{0, 1, execstore.MaxPartitions} {
		assert.NoError(t, ValidatePartitionCount("Partitions", n), n)
	}
	for _, n := range []int{-1, execstore.MaxPartitions + 1} {
		assert.ErrorIs(t, ValidatePartitionCount("Partitions", n), execstore.ErrInvalid, n)
	}
}
