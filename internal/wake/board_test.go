package wake_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore/internal/wake"
)

func marks(seqs ...int64) []wake.Mark {
	out := make([]wake.Mark, len(seqs))
	for i, s := range seqs {
		out[i] = wake.Mark{Seq: s, ID: string(rune('a' + s))}
	}
	return out
}

// A Cursor returns each mark once, all of a writer met for the first time, and says when a
// writer's marks kept start past the one after the last read.
func TestCursor(t *testing.T) {
	var c wake.Cursor
	fresh, missed := c.Next(map[string][]wake.Mark{"w1": marks(1, 2), "w2": marks(5, 6)})
	assert.Len(t, fresh, 4, "a new writer's marks are all new")
	assert.True(t, missed, "w2's first mark kept is 5: 1 to 4 were dropped before the first read")

	fresh, missed = c.Next(map[string][]wake.Mark{"w1": marks(1, 2, 3), "w2": marks(5, 6)})
	assert.Equal(t, marks(3), fresh, "only what came since")
	assert.False(t, missed)

	fresh, missed = c.Next(map[string][]wake.Mark{"w1": marks(2, 3, 4, 5), "w2": marks(8, 9)})
	assert.ElementsMatch(t, marks(4, 5, 8, 9), fresh)
	assert.True(t, missed, "w2's 7 was dropped between two reads")

	fresh, missed = c.Next(map[string][]wake.Mark{"w2": marks(8, 9)})
	assert.Empty(t, fresh)
	assert.False(t, missed)
	fresh, _ = c.Next(map[string][]wake.Mark{"w1": marks(1)})
	assert.Equal(t, marks(1), fresh, "a writer gone from the record starts again")

	fresh, missed = c.Next(nil)
	assert.Empty(t, fresh)
	assert.False(t, missed)

	// A write of marks hedged (sent twice) may apply twice, the second late: after the
	// writer's next write, or after a read.
	c = wake.Cursor{}
	fresh, _ = c.Next(map[string][]wake.Mark{"w": marks(1, 2)})
	assert.Equal(t, marks(1, 2), fresh)
	fresh, missed = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 3, 1, 2)})
	assert.Equal(t, marks(3), fresh, "marks pushed again are read once")
	assert.False(t, missed)
	fresh, missed = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 3, 1, 2, 4)})
	assert.Equal(t, marks(4), fresh)
	assert.False(t, missed)

	// Both copies of a hedged write may be read at once, in one read.
	c = wake.Cursor{}
	fresh, missed = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 1, 2)})
	assert.Equal(t, marks(1, 2), fresh, "a mark pushed twice before the first read is read once")
	assert.False(t, missed)
	fresh, _ = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 1, 2, 3, 4, 3, 4)})
	assert.Equal(t, marks(3, 4), fresh, "and so is one pushed twice between two reads")

	// A copy applied late may stand first among the marks kept while the writer's next
	// marks were pushed out: those are missed all the same.
	c = wake.Cursor{}
	_, _ = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 3)})
	fresh, missed = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 3, 6, 7)})
	assert.Equal(t, marks(6, 7), fresh)
	assert.True(t, missed, "4 and 5 were pushed out below the copy of 1 to 3")
	fresh, missed = c.Next(map[string][]wake.Mark{"w": marks(1, 2, 3, 6, 7, 9)})
	assert.Equal(t, marks(9), fresh)
	assert.True(t, missed, "8's write failed")
}

// HoldLocally marks a holder as this process's until its func is called.
func TestHoldLocally(t *testing.T) {
	assert.False(t, wake.Local("h"))
	done := wake.HoldLocally("h")
	assert.True(t, wake.Local("h"))
	done()
	assert.False(t, wake.Local("h"))
}
