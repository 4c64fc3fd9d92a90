package pool_test

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/internal/workers"
	"github.com/execstore/execstore/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Pool is what a user who shares one calls: New, Close and the two gauges; the machinery
// behind it stays inside the module.
func TestPoolMethodSet(t *testing.T) {
	typ := reflect.TypeFor[*pool.Pool]()
	var names []string
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"Close", "InFlight", "Len"}, names)
	assert.Equal(t, 32, workers.DefaultWorkers, "the default Config documents")
	assert.Equal(t, 1024, workers.DefaultQueueDepth, "the default Config documents")
}

// A store given a Pool runs its operations on it: the runner a store makes of it is a share of
// that pool, so the pool's gauges count the store's operations, and the pool outlives the
// share's Close.
func TestStoresRunOnTheSharedPool(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
	r := workers.RunnerFor(p, workers.Config{})
	release := make(chan struct{})
	started := make(chan struct{})
	var e workers.Envelope
	require.NoError(t, r.Submit(context.Background(), &e, blockingTask{started, release}))
	<-started
	assert.Equal(t, 1, p.InFlight(), "the share's task runs on the shared pool")
	close(release)
	require.NoError(t, r.Close(context.Background()))
	require.NoError(t, p.Close(context.Background()))

	own := workers.RunnerFor((*pool.Pool)(nil), workers.Config{Workers: 1})
	require.NoError(t, own.Close(context.Background()), "a nil Pool gives the store one of its own")
}

type blockingTask struct{ started, release chan struct{} }

func (b blockingTask) Run(context.Context) { close(b.started); <-b.release }
func (b blockingTask) Abort(error)         {}
