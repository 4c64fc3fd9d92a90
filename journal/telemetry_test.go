package journal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/execstore/execstore"
)

// Each journal operation is a span named after it, with the invocation id and the outcome:
// a second owner's claim is a conflict.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts := testOptions(t)
	opts.TracerProvider = tp
	j := openJournal(t, testRing, opts)
	id := ident("inv-1")
	_, err := j.Claim(bg, id, "a")
	require.NoError(t, err)
	_, err = j.Claim(bg, id, "b")
	require.ErrorIs(t, err, execstore.ErrConflict)

	var outcomes []string
	for _, sp := range rec.Ended() {
		if sp.Name() != "execstore.journal.claim" {
			continue
		}
		for _, kv := range sp.Attributes() {
			switch kv.Key {
			case "execstore.outcome":
				outcomes = append(outcomes, kv.Value.AsString())
			case "execstore.id":
				assert.Equal(t, "inv-1", kv.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{"ok", "conflict"}, outcomes)
}
