package memstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// The number of partitions is the option's, execstore.DefaultPartitions without one; past
// execstore.MaxPartitions New panics.
func TestPartitionsOption(t *testing.T) {
	for asked, want := range map[int]int{0: execstore.DefaultPartitions, -1: execstore.DefaultPartitions, 5: 5,
		execstore.MaxPartitions: execstore.MaxPartitions} {
		s := memstore.New(memstore.Options{Partitions: asked})
		assert.Equal(t, want, s.Partitions(), "asked %d", asked)
		assert.NoError(t, s.Close(bg))
	}
	assert.Panics(t, func() { memstore.New(memstore.Options{Partitions: execstore.MaxPartitions + 1}) })
}
