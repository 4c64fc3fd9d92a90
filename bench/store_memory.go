package main

import (
	"context"

	"github.com/execstore/execstore/memstore"
)

// memStore is the memory variant: the engine workload on package memstore, the execstore.Store
// kept in process memory, with the MongoDB store's default trace and dedupe settings. No server
// and no network are involved, so it measures the store's logic and the harness alone: the
// ceiling a server-backed variant can approach. It sends no server commands, and -rtt does not
// apply to it.
type memStore struct {
	apiStore
}

func (s *memStore) name() string { return variantMemory }

func (s *memStore) open(context.Context) error {
	s.store = memstore.New(memstore.Options{})
	return nil
}

// commands and pathCommands are empty: there is no server.
func (s *memStore) commands() commandCounts     { return commandCounts{} }
func (s *memStore) pathCommands() commandCounts { return commandCounts{} }

func (s *memStore) counts() map[string]int64 { return nil }
