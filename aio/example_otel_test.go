package aio_test

import (
	"context"
	"log"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// Traces to an OpenTelemetry collector over OTLP/HTTP, and metrics to a reader of your choice:
// every operation of the store is a span ("execstore.aio.commit", …) and
// db.client.operation.duration is recorded by operation and outcome. It needs a collector
// listening on localhost:4318, so it is compiled, not run.
func Example_openTelemetry() {
	ctx := context.Background()
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint("localhost:4318"), otlptracehttp.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	defer tp.Shutdown(ctx)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)

	store, err := aio.Open(ctx, "mongodb://localhost:27017", aio.Options{Connection: server.Connection{
		Database: "orders", TracerProvider: tp, MeterProvider: mp}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
}
