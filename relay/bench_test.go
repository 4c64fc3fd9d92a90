package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// BenchmarkRelay measures a relay on memstore: entries delivered and acked per second, with
// 1 and 64 lanes, with a handler that does nothing (the relay's own cost) and one that
// sleeps 200µs (a delivery over the network, where lanes overlap; the sleep lasts as long as
// the system's timers make it, which one lane measures). The entries are committed in
// chunks of benchChunk (one commit each, to benchChunk targets, with the clock stopped), and
// each chunk is timed from its commit to its last ack: memstore's ack shifts the entries
// after the acked one, so a backlog of b.N entries would measure memstore, not the relay.
//
//	go test -run '^$' -bench BenchmarkRelay ./relay/
func BenchmarkRelay(b *testing.B) {
	for _, handler := range []struct {
		name string
		fn   func(context.Context, execstore.OutboxEntry) error
	}{
		{"nop", func(context.Context, execstore.OutboxEntry) error { return nil }},
		{"sleep200us", func(context.Context, execstore.OutboxEntry) error { time.Sleep(200 * time.Microsecond); return nil }},
	} {
		for _, lanes := range []int{1, 64} {
			b.Run(fmt.Sprintf("handler=%s/lanes=%d", handler.name, lanes), func(b *testing.B) {
				benchRelay(b, lanes, handler.fn)
			})
		}
	}
}

const benchChunk = 512

func benchRelay(b *testing.B, lanes int, handler func(context.Context, execstore.OutboxEntry) error) {
	store := memstore.New(memstore.Options{})
	defer store.Close(bg)
	r := relay.New(store, handler, relay.Options{Lanes: lanes, PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}()

	exe := &execstore.Execution{ID: "source", DefinitionID: "bench", Status: execstore.Running}
	emits := make([]execstore.Emit, benchChunk)
	for i := range emits {
		emits[i] = execstore.Emit{TargetID: fmt.Sprintf("target-%d", i), Event: []byte(`{"type":"bench"}`)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for sent := 0; sent < b.N; {
		n := min(benchChunk, b.N-sent)
		if _, err := store.Commit(bg, exe, execstore.Commit{Emits: emits[:n]}); err != nil {
			b.Fatal(err)
		}
		sent += n
		b.StartTimer()
		for r.Stats().Acked < int64(sent) {
			time.Sleep(20 * time.Microsecond)
		}
		b.StopTimer()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
