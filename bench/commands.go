package main

import (
	"context"
	"maps"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/execstore/execstore/aio"
)

// commandCounter counts the commands a client sends, by command name, through a driver
// command monitor. The driver reports every command of an operation (a find's getMores, each
// batch of a bulk write) and none of its own monitoring, so the count is exact.
//
// It also counts them by the aio operation each served (aio.OperationOf; "other" for none):
// the commands a handler waits for ("commit", "load_for_event", "load") apart from those
// sent on a relay's behalf ("ack_outbox", "pending_outbox", "wake", …).
type commandCounter struct {
	mu     sync.Mutex
	byName map[string]int64
	byOp   map[string]int64
	path   map[string]int64 // by name, the commands of handlerOps alone
}

func newCommandCounter() *commandCounter {
	return &commandCounter{byName: make(map[string]int64), byOp: make(map[string]int64), path: make(map[string]int64)}
}

// monitor returns the monitor to set on a client's options.
func (c *commandCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			op := aio.OperationOf(ctx)
			if op == "" {
				op = "other"
			}
			c.mu.Lock()
			c.byName[e.CommandName]++
			c.byOp[op]++
			if slices.Contains(handlerOps, op) {
				c.path[e.CommandName]++
			}
			c.mu.Unlock()
		},
	}
}

// snapshot returns the counts so far.
func (c *commandCounter) snapshot() commandCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return commandCounts(maps.Clone(c.byName))
}

// pathSnapshot returns the counts so far, by name, of the commands of handlerOps alone.
func (c *commandCounter) pathSnapshot() commandCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return commandCounts(maps.Clone(c.path))
}

// operations returns the counts so far by operation.
func (c *commandCounter) operations() commandCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return commandCounts(maps.Clone(c.byOp))
}

// handlerOps are the operations whose commands a handler waits for: its loads and commits.
var handlerOps = []string{"commit", "load_for_event", "load"}

// handlers returns the commands of handlerOps in c, counts by operation.
func (c commandCounts) handlers() int64 {
	var n int64
	for _, op := range handlerOps {
		n += c[op]
	}
	return n
}

// commandCounts is a number of commands by command name.
type commandCounts map[string]int64

// total returns the number of commands of every name.
func (c commandCounts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// since returns the commands sent after before was taken.
func (c commandCounts) since(before commandCounts) commandCounts {
	out := make(commandCounts)
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// plus returns the commands of c and other together.
func (c commandCounts) plus(other commandCounts) commandCounts {
	out := maps.Clone(c)
	if out == nil {
		out = make(commandCounts)
	}
	for k, v := range other {
		out[k] += v
	}
	return out
}
