package connect

import (
	"time"

	"github.com/execstore/execstore/internal/workers"
	"github.com/execstore/execstore/server"
)

// The defaults of server.Connection, as its fields document them.
const (
	defaultDatabase       = "execstore"
	defaultPingInterval   = 100 * time.Millisecond
	defaultConnectTimeout = 30 * time.Second
	defaultSettleTimeout  = 5 * time.Second
)

// Defaults returns c with every default of server.Connection worked out, for a store whose
// own collection is collection by default: the one place those defaults are applied, for
// every store alike.
func Defaults(c server.Connection, collection string) server.Connection {
	if c.Database == "" {
		c.Database = defaultDatabase
	}
	if c.Collection == "" {
		c.Collection = collection
	}
	if c.Workers <= 0 {
		c.Workers = workers.DefaultWorkers
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = workers.DefaultQueueDepth
	}
	if c.PingInterval <= 0 {
		c.PingInterval = defaultPingInterval
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = defaultSettleTimeout
	}
	return c
}
