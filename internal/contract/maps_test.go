package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// With a window of 3, versions 0…2 are generation 0, 3…5 generation 1, 6…8 generation 2: an
// id recorded in generation 1 is held through generation 2 and gone when generation 3 starts
// (its array is reset by the commit that creates version 9).
func TestDedupeStillHeld(t *testing.T) {
	for current := int64(4); current <= 12; current++ {
		assert.Equal(t, current <= 8, DedupeStillHeld(4, current, 3), "recorded at 4, at %d", current)
	}
	assert.True(t, DedupeStillHeld(1, 1, 1))
	assert.True(t, DedupeStillHeld(1, 2, 1))
	assert.False(t, DedupeStillHeld(1, 3, 1))
	gen, starts := DedupeGeneration(9, 3)
	assert.Equal(t, 1, gen, "version 9 writes the array generation 1 wrote")
	assert.True(t, starts)
}
