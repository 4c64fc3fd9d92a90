package latency_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore/internal/latency"
)

// A Window's median is unknown until Min latencies came, then is the median of the last
// Size: one slow answer does not move it, a run of them does, and it comes back as fast
// answers replace them.
func TestWindowMedian(t *testing.T) {
	w := latency.Window{Size: 5, Min: 3}
	_, ok := w.Median()
	assert.False(t, ok, "none came")
	w.Observe(2 * time.Millisecond)
	w.Observe(time.Second)
	_, ok = w.Median()
	assert.False(t, ok, "two came, three are needed")
	w.Observe(3 * time.Millisecond)
	m, ok := w.Median()
	assert.True(t, ok)
	assert.Equal(t, 3*time.Millisecond, m, "one slow answer does not move it")

	for range 3 {
		w.Observe(time.Second)
	}
	m, _ = w.Median()
	assert.Equal(t, time.Second, m, "four of the last five slow")
	for range 3 {
		w.Observe(time.Millisecond)
	}
	m, _ = w.Median()
	assert.Equal(t, time.Millisecond, m, "three of the last five fast again")
}

// The zero Window takes the median of the last DefaultSize once DefaultMin came.
func TestWindowDefaults(t *testing.T) {
	var w latency.Window
	for i := range latency.DefaultMin - 1 {
		w.Observe(time.Duration(i) * time.Millisecond)
	}
	_, ok := w.Median()
	assert.False(t, ok)
	w.Observe(time.Hour)
	m, ok := w.Median()
	assert.True(t, ok)
	assert.Equal(t, time.Duration(latency.DefaultMin/2)*time.Millisecond, m)
	for range latency.DefaultSize {
		w.Observe(time.Minute)
	}
	m, _ = w.Median()
	assert.Equal(t, time.Minute, m, "only the last DefaultSize count")
}
