package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRelayOrder(t *testing.T) {
	// Source b's seqs do not grow with its versions (two processes took blocks out of order):
	// b's entries stay in version order, everything else by seq.
	in := []ordered{
		{source: "a", version: 1, seq: 5, pos: 0},
		{source: "b", version: 1, seq: 300, pos: 1},
		{source: "b", version: 2, seq: 7, pos: 2},
		{source: "a", version: 2, seq: 6, pos: 3},
		{source: "c", version: 1, seq: 400, pos: 4},
	}
	out := relayOrder(in)
	var pos []int
	for _, o := range out {
		pos = append(pos, o.pos)
	}
	assert.Equal(t, []int{0, 3, 1, 2, 4}, pos)
}
