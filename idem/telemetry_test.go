package idem

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Each claim, completion and read is a span named after it, with the key and the outcome.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var opts Options
	opts.TracerProvider = tp
	s := openStore(t, opts)

	c, err := s.Claim(bg, "k", "fp", 1, time.Minute)
	require.NoError(t, err)
	_, err = s.Complete(bg, "k", c.Token, Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	_, err = s.Get(bg, "")
	require.Error(t, err)

	var names []string
	for _, sp := range rec.Ended() {
		names = append(names, sp.Name())
		got := map[string]string{}
		for _, kv := range sp.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		assert.Equal(t, "k", got["execstore.id"], sp.Name())
		assert.Equal(t, "ok", got["execstore.outcome"], sp.Name())
		assert.Equal(t, "mongodb", got["db.system.name"], sp.Name())
		assert.NotEqual(t, codes.Error, sp.Status().Code)
	}
	assert.Equal(t, []string{"execstore.idem.claim", "execstore.idem.complete"}, names,
		"input refused before any I/O makes no span")
}
