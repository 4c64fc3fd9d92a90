package telemetry

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/execstore/execstore"
)

// The global providers before an SDK is set are recognised as placeholders, so that a store
// left with them instruments nothing; an SDK's provider is not one.
func TestGlobalPlaceholders(t *testing.T) {
	assert.True(t, placeholder(otel.GetTracerProvider()), "%T", otel.GetTracerProvider())
	assert.True(t, placeholder(otel.GetMeterProvider()), "%T", otel.GetMeterProvider())
	assert.Nil(t, New("aio", "db", "c", nil, nil, nil), "the global placeholders: nothing to instrument")
	assert.Nil(t, New("aio", "db", "c", tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider(), nil))
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	assert.False(t, placeholder(tp))
	assert.NotNil(t, New("aio", "db", "c", tp, nil, nil), "traces to an SDK, metrics to the placeholder")
}

// Every error the stores return has its outcome.
func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil:                        "ok",
		&execstore.ConflictError{}: "conflict",
		fmt.Errorf("x: %w", execstore.ErrAlreadyProcessed):    "already_processed",
		&execstore.OutcomeUnknownError{Err: context.Canceled}: "unknown",
		&execstore.InvalidError{}:                             "invalid",
		execstore.ErrOverloaded:                               "overloaded",
		execstore.ErrClosed:                                   "closed",
		execstore.ErrNotFound:                                 "not_found",
		context.DeadlineExceeded:                              "canceled",
		errors.New("boom"):                                    "error",
	} {
		assert.Equal(t, want, Outcome(err), "%v", err)
	}
}
