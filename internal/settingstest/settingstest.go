// Package settingstest checks, for a store's Options, the module's rule that a setting a store
// cannot honour is refused, never ignored: a table names, for every field of the Options, the
// values Open must refuse (or why a field has none), and Refused tries each one against a real
// server.
//
// What always holds:
//   - Every exported field of the Options, the fields of an embedded struct under its name
//     ("Connection.Workers"), has a row: a field added without one fails the test, and so
//     does a row for a field that is gone.
//   - Each bad value must make Open fail with an error matching execstore.ErrInvalid that is an
//     *execstore.InvalidError naming the row's field, and with no command sent to the server.
package settingstest

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/pool"
	"github.com/execstore/execstore/server"
)

// Bad is one value of a setting that Open must refuse: Set applies it to the options, and
// Field is the field the refusal names.
type Bad[O any] struct {
	Name  string
	Set   func(t *testing.T, o *O)
	Field string
}

// Value is the Bad that applies set, for a value that needs nothing of the test.
func Value[O any](name, field string, set func(o *O)) Bad[O] {
	return Bad[O]{Name: name, Field: field, Set: func(_ *testing.T, o *O) { set(o) }}
}

// Row is what the table says of one setting: the bad values to try, or, in None, why the
// setting has none.
type Row[O any] struct {
	Bad  []Bad[O]
	None string
}

// Opener opens a store against a real server with options of the test's own, having applied
// set to them, and a command monitor made by ClientOptions in their ClientOptions. It
// returns the commands the monitor saw, and closes the store when it opened.
type Opener[O any] func(t *testing.T, set func(*O)) (commands int64, err error)

// Names returns the exported fields of struct type t as dotted paths, the fields of an
// embedded struct under its name.
func Names(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !f.IsExported():
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			for _, n := range Names(f.Type) {
				names = append(names, f.Name+"."+n)
			}
		default:
			names = append(names, f.Name)
		}
	}
	return names
}

// Refused checks table against the fields of O and tries each of its bad values with open.
func Refused[O any](t *testing.T, table map[string]Row[O], open Opener[O]) {
	fields := Names(reflect.TypeFor[O]())
	for _, f := range fields {
		row, ok := table[f]
		if !assert.True(t, ok, "field %s has no row: say what Open must refuse of it, or why nothing", f) {
			continue
		}
		assert.True(t, len(row.Bad) > 0 != (row.None != ""), "row %s gives bad values or a reason for none, not both", f)
	}
	for f, row := range table {
		assert.True(t, slices.Contains(fields, f), "row %s names no field of the options", f)
		for _, b := range row.Bad {
			t.Run(strings.ReplaceAll(f+"="+b.Name, "/", "∕"), func(t *testing.T) {
				commands, err := open(t, func(o *O) { b.Set(t, o) })
				require.Error(t, err, "Open accepted %s = %s", f, b.Name)
				assert.ErrorIs(t, err, execstore.ErrInvalid)
				var ie *execstore.InvalidError
				if assert.ErrorAs(t, err, &ie) {
					assert.Equal(t, b.Field, ie.Field, "%v", err)
				}
				assert.Zero(t, commands, "no command is sent before the refusal")
			})
		}
	}
}

// Connection returns the rows of every field of server.Connection, with the bad values every
// store refuses; conn gives the Connection of the options. A store adds its own rows, or
// replaces these, for what it alone refuses.
func Connection[O any](conn func(*O) *server.Connection) map[string]Row[O] {
	bad := func(name, field string, f func(*server.Connection)) Bad[O] {
		return Bad[O]{Name: name, Set: func(_ *testing.T, o *O) { f(conn(o)) }, Field: field}
	}
	withPool := func(name, field string, f func(*server.Connection)) Bad[O] {
		return Bad[O]{Name: name, Field: field, Set: func(t *testing.T, o *O) {
			p := pool.New(pool.Config{Workers: 2, QueueDepth: 2})
			t.Cleanup(func() { assert.NoError(t, p.Close(context.Background())) })
			conn(o).Pool = p
			f(conn(o))
		}}
	}
	var database []Bad[O]
	for _, name := range []string{"bad.name", "with space", "a/b", `a\b`, "$x", `a"b`, "a*b", "a<b", "a>b", "a:b",
		"a|b", "a?b", "a\x00b", strings.Repeat("d", 64), strings.Repeat("d", 100)} {
		database = append(database, bad(name, "Connection.Database", func(c *server.Connection) { c.Database = name }))
	}
	var collection []Bad[O]
	for _, name := range []string{"$x", "a\x00b", "system.x", ".x", strings.Repeat("c", 250)} {
		collection = append(collection, bad(name, "Connection.Collection", func(c *server.Connection) { c.Collection = name }))
	}
	none := "any value is honoured; nil is the default"
	return map[string]Row[O]{
		"Connection.Database":   {Bad: database},
		"Connection.Collection": {Bad: collection},
		"Connection.ClientOptions": {Bad: []Bad[O]{
			bad("minPoolSize above maxPoolSize", "Connection.ClientOptions", func(c *server.Connection) {
				c.ClientOptions.SetMinPoolSize(10).SetMaxPoolSize(5)
			}),
			bad("heartbeat below 500ms", "Connection.ClientOptions", func(c *server.Connection) {
				c.ClientOptions.SetHeartbeatInterval(time.Millisecond)
			}),
		}},
		"Connection.Workers":    {Bad: []Bad[O]{bad("-1", "Connection.Workers", func(c *server.Connection) { c.Workers = -1 })}},
		"Connection.QueueDepth": {Bad: []Bad[O]{bad("-1", "Connection.QueueDepth", func(c *server.Connection) { c.QueueDepth = -1 })}},
		"Connection.Pool": {Bad: []Bad[O]{
			withPool("with Workers", "Connection.Workers", func(c *server.Connection) { c.Workers = 3 }),
			withPool("with QueueDepth", "Connection.QueueDepth", func(c *server.Connection) { c.QueueDepth = 3 }),
		}},
		"Connection.ShedLoad":       {None: "a bool: either value is honoured"},
		"Connection.PingInterval":   {Bad: []Bad[O]{bad("-1ns", "Connection.PingInterval", func(c *server.Connection) { c.PingInterval = -1 })}},
		"Connection.ConnectTimeout": {Bad: []Bad[O]{bad("-1s", "Connection.ConnectTimeout", func(c *server.Connection) { c.ConnectTimeout = -time.Second })}},
		"Connection.Profile":        {Bad: []Bad[O]{bad("bogus", "Connection.Profile", func(c *server.Connection) { c.Profile = "bogus" })}},
		"Connection.WriteConcern": {Bad: []Bad[O]{bad("w: 0", "Connection.WriteConcern", func(c *server.Connection) {
			c.WriteConcern = writeconcern.Unacknowledged()
		})}},
		"Connection.ReadConcern": {Bad: []Bad[O]{bad("level bogus", "Connection.ReadConcern", func(c *server.Connection) {
			c.ReadConcern = &readconcern.ReadConcern{Level: "bogus"}
		})}},
		"Connection.SettleTimeout":  {Bad: []Bad[O]{bad("-1s", "Connection.SettleTimeout", func(c *server.Connection) { c.SettleTimeout = -time.Second })}},
		"Connection.Logger":         {None: none},
		"Connection.TracerProvider": {None: none},
		"Connection.MeterProvider":  {None: none},
	}
}

// ClientOptions returns client options whose command monitor counts into n every command the
// client starts.
func ClientOptions(n *atomic.Int64) *options.ClientOptions {
	return options.Client().SetMonitor(&event.CommandMonitor{
		Started: func(context.Context, *event.CommandStartedEvent) { n.Add(1) },
	})
}
