package wake

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingSink records every Begin and End it sees. Begin returns a token of its own, which
// End must be given back.
type recordingSink struct {
	name   string
	mu     sync.Mutex
	begins []string
	ends   []sinkEnd
	next   int
}

type sinkEnd struct {
	id    string
	begun any
	c     *Committed
}

func (k *recordingSink) Begin(id string) any {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.begins = append(k.begins, id)
	k.next++
	return fmt.Sprintf("%s#%d", k.name, k.next)
}

func (k *recordingSink) End(id string, begun any, c *Committed) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ends = append(k.ends, sinkEnd{id: id, begun: begun, c: c})
}

func (k *recordingSink) seen() ([]string, []sinkEnd) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.begins...), append([]sinkEnd(nil), k.ends...)
}

// With no sink, Begin returns nil and End on nil does nothing; a nil signal has no sinks.
func TestBeginWithoutSinks(t *testing.T) {
	s := &Signal{}
	f := s.Begin("x")
	assert.Nil(t, f)
	f.End(&Committed{ExecutionID: "x"})
	var none *Signal
	assert.Nil(t, none.Begin("x"))
}

// A sink sees the Begin, then one End with what its Begin returned and the Committed; a
// second End of the same commit reaches no one.
func TestBeginEndExactlyOnce(t *testing.T) {
	s := &Signal{}
	k := &recordingSink{name: "k"}
	unsubscribe := s.Subscribe(k)
	defer unsubscribe()

	f := s.Begin("x")
	require.NotNil(t, f)
	begins, ends := k.seen()
	assert.Equal(t, []string{"x"}, begins, "Begin reaches the sink at once")
	assert.Empty(t, ends)

	won := &Committed{ExecutionID: "x", Version: 3}
	f.End(won)
	f.End(nil)
	begins, ends = k.seen()
	assert.Equal(t, []string{"x"}, begins)
	require.Len(t, ends, 1)
	assert.Equal(t, "x", ends[0].id)
	assert.Equal(t, "k#1", ends[0].begun)
	assert.Same(t, won, ends[0].c)

	s.Begin("y").End(nil)
	_, ends = k.seen()
	require.Len(t, ends, 2)
	assert.Equal(t, sinkEnd{id: "y", begun: "k#2"}, ends[1], "a commit that did not win ends with nil")
}

// Several sinks each get their own Begin and End, with their own Begin's result.
func TestSeveralSinks(t *testing.T) {
	s := &Signal{}
	a, b := &recordingSink{name: "a"}, &recordingSink{name: "b"}
	defer s.Subscribe(a)()
	defer s.Subscribe(b)()

	c := &Committed{ExecutionID: "x", Version: 1}
	s.Begin("x").End(c)
	for _, k := range []*recordingSink{a, b} {
		begins, ends := k.seen()
		assert.Equal(t, []string{"x"}, begins, k.name)
		assert.Equal(t, []sinkEnd{{id: "x", begun: k.name + "#1", c: c}}, ends, k.name)
	}

	// One sink subscribed twice is two subscriptions.
	twice := &recordingSink{name: "t"}
	first, second := s.Subscribe(twice), s.Subscribe(twice)
	s.Begin("y").End(nil)
	begins, ends := twice.seen()
	assert.Equal(t, []string{"y", "y"}, begins)
	assert.Len(t, ends, 2)
	first()
	second()
}

// After unsubscribe a sink sees no new commit, but a commit it saw begin still ends on it.
// Unsubscribing again does nothing, and the others keep their subscriptions.
func TestUnsubscribe(t *testing.T) {
	s := &Signal{}
	gone, kept := &recordingSink{name: "gone"}, &recordingSink{name: "kept"}
	unsubscribe := s.Subscribe(gone)
	defer s.Subscribe(kept)()

	f := s.Begin("before")
	unsubscribe()
	unsubscribe()
	s.Begin("after").End(nil)
	f.End(nil)

	begins, ends := gone.seen()
	assert.Equal(t, []string{"before"}, begins)
	assert.Equal(t, []sinkEnd{{id: "before", begun: "gone#1"}}, ends, "the commit in flight still ends")
	begins, ends = kept.seen()
	assert.Equal(t, []string{"before", "after"}, begins)
	assert.Len(t, ends, 2)

	// The last unsubscribe leaves the signal without sinks: Begin is nil again.
	only := &Signal{}
	only.Subscribe(gone)()
	assert.Nil(t, only.Begin("x"))
}

// Commits that begin and end while sinks come and go: every Begin a sink saw gets exactly
// one End, with that Begin's result. Run with -race.
func TestConcurrentSubscriptions(t *testing.T) {
	s := &Signal{}
	const committers, each, sinks = 4, 500, 4
	var wg sync.WaitGroup
	for c := range committers {
		wg.Go(func() {
			for i := range each {
				s.Begin(fmt.Sprintf("c%d-%d", c, i)).End(nil)
			}
		})
	}
	recorded := make([]*recordingSink, sinks)
	for i := range recorded {
		recorded[i] = &recordingSink{name: fmt.Sprint(i)}
		wg.Go(func() {
			for range 50 {
				s.Subscribe(recorded[i])()
			}
		})
	}
	wg.Wait()
	for _, k := range recorded {
		begins, ends := k.seen()
		require.Len(t, ends, len(begins), "sink %s", k.name)
		byToken := map[any]int{}
		for _, e := range ends {
			byToken[e.begun]++
		}
		assert.Len(t, byToken, len(begins), "sink %s: each Begin's result is ended once", k.name)
	}
}

// Without a sink, the commit path's Begin and End allocate nothing.
func TestHandOffWithoutSinksAllocatesNothing(t *testing.T) {
	s := &Signal{}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.Begin("x").End(nil) }))
	s.Subscribe(&recordingSink{})()
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.Begin("x").End(nil) }), "after the last unsubscribe")
}

func BenchmarkBeginEndNoSink(b *testing.B) {
	s := &Signal{}
	b.ReportAllocs()
	for b.Loop() {
		s.Begin("x").End(nil)
	}
}

// nullSink is a sink that keeps nothing.
type nullSink struct{}

func (nullSink) Begin(string) any            { return nil }
func (nullSink) End(string, any, *Committed) {}

func BenchmarkBeginEndOneSink(b *testing.B) {
	s := &Signal{}
	defer s.Subscribe(nullSink{})()
	c := &Committed{}
	b.ReportAllocs()
	for b.Loop() {
		s.Begin("x").End(c)
	}
}
