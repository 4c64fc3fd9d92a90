package contract

import (
	"slices"

	"github.com/execstore/execstore"
)

// ValidatePartitionCount checks a number of partitions asked for in options: 0 (the default)
// or in [1, execstore.MaxPartitions].
func ValidatePartitionCount(field string, n int) error {
	if n < 0 || n > execstore.MaxPartitions {
		return Invalid(field, "must be between 1 and %d (0 for the default), got %d", execstore.MaxPartitions, n)
	}
	return nil
}

// ValidatePartitions checks the partitions of a partitioned scan of a store of n partitions:
// each in [0, n). It returns them sorted, each once.
func ValidatePartitions(field string, partitions []int, n int) ([]int, error) {
	for _, p := range partitions {
		if p < 0 || p >= n {
			return nil, Invalid(field, "partition %d is not in [0, %d)", p, n)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(partitions))), nil
}
