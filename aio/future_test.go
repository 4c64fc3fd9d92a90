package aio_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore/aio"
)

// A caller of a Future can wait on it, poll it and take its result, and nothing more: the
// calls that settle or hand on an operation stay with the store.
func TestFutureMethodSet(t *testing.T) {
	want := map[string]string{
		"Done":   reflect.TypeFor[func(*aio.Future[int]) <-chan struct{}]().String(),
		"Result": reflect.TypeFor[func(*aio.Future[int]) (int, error)]().String(),
		"Wait":   reflect.TypeFor[func(*aio.Future[int], context.Context) (int, error)]().String(),
	}
	got := map[string]string{}
	for m := range reflect.TypeFor[*aio.Future[int]]().Methods() {
		got[m.Name] = m.Type.String()
	}
	assert.Equal(t, want, got)
	assert.Zero(t, reflect.TypeFor[aio.Future[int]]().NumMethod(), "a Future is used through its pointer")
}
