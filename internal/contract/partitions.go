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

// ValidateTargets checks the executions of a targeted read (execstore.Targeted): each a
// valid id, at most execstore.MaxTargetedIDs of them. It returns them sorted, each once.
func ValidateTargets(field string, ids []string) ([]string, error) {
	if len(ids) > execstore.MaxTargetedIDs {
		return nil, Invalid(field, "names %d executions, more than the %d allowed", len(ids), execstore.MaxTargetedIDs)
	}
	for _, id := range ids {
		if err := ValidateID(field, id); err != nil {
			return nil, err
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(ids))), nil
}
