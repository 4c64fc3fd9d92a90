package storetest

import (
	"testing"

	"github.com/execstore/execstore"
)

// behaviour is one behaviour a suite checks of a store of kind S.
type behaviour[S any] struct {
	name  string
	check func(t *testing.T, s S)
}

// runEach runs each of behaviours as a subtest, on a store of its own that open makes.
func runEach[S any](t *testing.T, behaviours []behaviour[S], open func(t *testing.T) S) {
	t.Helper()
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) { b.check(t, open(t)) })
	}
}

// runIf runs suite when the stores open makes are of kind S, each seen as an S.
func runIf[S any](t *testing.T, open func(t *testing.T) execstore.Store, suite func(t *testing.T, open func(t *testing.T) S)) {
	t.Helper()
	if _, ok := open(t).(S); !ok {
		return
	}
	suite(t, func(t *testing.T) S { return open(t).(S) })
}
