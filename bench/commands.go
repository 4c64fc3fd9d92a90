package main

import (
	"context"
	"maps"
	"sync"

	"go.mongodb.org/mongo-driver/v2/event"
)

// commandCounter counts the commands a client sends, by command name, through a driver
// command monitor. The driver reports every command of an operation (a find's getMores, each
// batch of a bulk write) and none of its own monitoring, so the count is exact.
type commandCounter struct {
	mu     sync.Mutex
	byName map[string]int64
}

func newCommandCounter() *commandCounter {
	return &commandCounter{byName: make(map[string]int64)}
}

// monitor returns the monitor to set on a client's options.
func (c *commandCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			c.mu.Lock()
			c.byName[e.CommandName]++
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
