package ui

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
)

// The overview's rates are the last 60 minutes of the samples the fixture recorded, summed
// over the relay and the sweeper, a minute none recorded a row of zeros.
func TestOverviewRates(t *testing.T) {
	ts, _ := serve(t, Options{})
	resp, body := get(t, ts, http.MethodGet, "/?format=json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var p struct {
		Rates inspect.Rates `json:"rates"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	r := p.Rates
	require.Len(t, r.Minutes, rateMinutes)
	assert.Equal(t, 2, r.Members)
	var delivered, fired, failed, dead int64
	for _, m := range r.Minutes {
		delivered, fired, failed, dead = delivered+m.Delivered, fired+m.Fired, failed+m.Failed, dead+m.Dead
	}
	var want, wantFired int64
	for i := range 45 {
		load := int64(20 + (i*37)%60)
		want, wantFired = want+load, wantFired+load/4
	}
	assert.Equal(t, want, delivered)
	assert.Equal(t, wantFired, fired)
	assert.Equal(t, int64(5+10+15+20), failed)
	assert.Equal(t, int64(1), dead)
	assert.Zero(t, r.Minutes[0].Delivered, "the first minutes of the hour recorded nothing")
	assert.InDelta(t, 13, maxAge(r), 0.001)
}

func maxAge(r inspect.Rates) float64 {
	top := 0.0
	for _, m := range r.Minutes {
		top = max(top, m.AgeSeconds)
	}
	return top
}

// drawBars scales the tallest stack to the chart's height, stacks segments bottom up, and
// draws no segment for a zero.
func TestDrawBars(t *testing.T) {
	c := drawBars("t", [][]float64{{2, 0, 2}, {0, 0, 0}, {1, 1, 0}}, []string{"ok", "failed", "dead"}, []string{"a", "b", "c"}, "f", "l", "%.0f")
	require.Len(t, c.Bars, 3)
	assert.Equal(t, "4", c.Top)
	assert.False(t, c.Empty)
	assert.Equal(t, []chartSegment{{Y: "45.00", H: "45.00", Class: "ok"}, {Y: "0.00", H: "45.00", Class: "dead"}}, c.Bars[0].Segments)
	assert.Empty(t, c.Bars[1].Segments)
	assert.Equal(t, []chartSegment{{Y: "67.50", H: "22.50", Class: "ok"}, {Y: "45.00", H: "22.50", Class: "failed"}}, c.Bars[2].Segments)
	assert.Equal(t, "201.00", c.Bars[1].X)
	assert.True(t, drawBars("t", [][]float64{{0}}, []string{"age"}, []string{"a"}, "", "", "%.1fs").Empty)
}
