// Package waketest is a recording wake.Sink for the tests of the stores that hand their
// commits to the relays of their process (package internal/wake).
//
// What always holds: a Recorder counts as a problem every End without its Begin, every
// second End of one Begin, every End of a commit whose Run has returned, and (at Check) every
// Begin left without its End.
package waketest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/execstore/execstore/internal/wake"
)

// Recorder is a wake.Sink that records what every commit told it. Create it with Subscribe.
type Recorder struct {
	mu       sync.Mutex
	next     int
	open     map[int]string       // Begin's token → execution id, until its End
	running  map[string]int       // Runs of an execution in progress
	returned map[string]bool      // a Run of the execution has returned, and none runs
	ends     map[string][]Outcome // by execution id, in the order they came
	problems []string
}

// Outcome is what one End told the sink: c is the Committed of a won commit, nil otherwise.
type Outcome struct {
	ID string
	C  *wake.Committed
}

// Subscribe returns a Recorder subscribed to s until the test ends. At the end it checks,
// as Check does, that every Begin was ended, each once and on time.
func Subscribe(t testing.TB, s *wake.Signal) *Recorder {
	t.Helper()
	if s == nil {
		t.Fatal("waketest: the store registered no signal")
	}
	r := &Recorder{open: map[int]string{}, running: map[string]int{}, returned: map[string]bool{},
		ends: map[string][]Outcome{}}
	unsubscribe := s.Subscribe(r)
	t.Cleanup(func() {
		unsubscribe()
		r.Check(t)
	})
	return r
}

// Begin records the start of a commit of id.
func (r *Recorder) Begin(id string) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	r.open[r.next] = id
	return r.next
}

// End records the outcome of the commit its Begin returned begun for.
func (r *Recorder) End(id string, begun any, c *wake.Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	token, _ := begun.(int)
	began, ok := r.open[token]
	switch {
	case !ok:
		r.problems = append(r.problems, fmt.Sprintf("End of %q without its Begin, or a second End", id))
	case began != id:
		r.problems = append(r.problems, fmt.Sprintf("End of %q given the Begin of %q", id, began))
	}
	delete(r.open, token)
	if r.returned[id] {
		r.problems = append(r.problems, fmt.Sprintf("End of %q after its commit returned", id))
	}
	r.ends[id] = append(r.ends[id], Outcome{ID: id, C: c})
}

// Run calls commit, which commits execution id, and returns the Ends of id recorded while it
// ran. An End of id that comes once Run has returned (and before the next Run of id) is a
// problem. Runs of one execution may overlap.
func (r *Recorder) Run(id string, commit func()) []Outcome {
	r.mu.Lock()
	r.running[id]++
	r.returned[id] = false
	before := len(r.ends[id])
	r.mu.Unlock()
	commit()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id]--
	r.returned[id] = r.running[id] == 0
	return append([]Outcome(nil), r.ends[id][before:]...)
}

// Open returns how many Begins have had no End yet.
func (r *Recorder) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// Check fails t with every problem recorded so far, and for every Begin not yet ended.
func (r *Recorder) Check(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Error("waketest: " + p)
	}
	for _, id := range r.open {
		t.Errorf("waketest: a commit of %q began and never ended", id)
	}
}
