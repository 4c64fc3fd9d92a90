package connect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/execstore/execstore/pool"
	"github.com/execstore/execstore/server"
)

// The zero Connection gets every default its fields document; a set field is kept.
func TestDefaults(t *testing.T) {
	assert.Equal(t, server.Connection{Database: "execstore", Collection: "things", Workers: 32,
		QueueDepth: 1024, PingInterval: 100 * time.Millisecond, ConnectTimeout: 30 * time.Second,
		SettleTimeout: 5 * time.Second},
		Defaults(server.Connection{}, "things"))

	p := pool.New(pool.Config{})
	defer p.Close(t.Context())
	set := server.Connection{Database: "d", Collection: "c", Workers: 3, QueueDepth: 4, Pool: p,
		ShedLoad: true, PingInterval: time.Second, ConnectTimeout: time.Hour, Profile: server.FerretDB, SettleTimeout: time.Minute}
	assert.Equal(t, set, Defaults(set, "things"))
}
