package journal

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/unique"
)

// The concerns on the wire: every write carries {w: "majority", j: true} and no
// transaction number (no driver retries), the retention's delete and count and Open's
// createIndexes included; every read readConcern majority, from the primary. wtimeout is never sent: driver v2 cannot, the write timeout is the operation's
// deadline (Options.WriteTimeout).
func TestConcernsOnTheWire(t *testing.T) {
	var mu sync.Mutex
	var cmds []bson.Raw
	names := map[string]int{}
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		names[e.CommandName]++
		switch e.CommandName {
		case "insert", "update", "findAndModify", "find", "delete", "createIndexes":
			cmds = append(cmds, e.Command)
		}
	}}
	opts := testOptions(t)
	opts.ClientOptions = options.Client().SetMonitor(monitor)
	j := openJournal(t, nil, opts)
	id := ident("wire")
	f := lifeUntilReceipt(t, j, id, Failed)
	require.NoError(t, j.VerifyOwner(bg, f))
	_, err := j.HasInvocation(bg, id)
	require.NoError(t, err)
	_, err = j.Claim(bg, id, "worker-2") // an insert refused, then a read
	require.Error(t, err)
	// The retention: a read, a delete, and the count (an update, an insert, an update).
	lifeUntilReceipt(t, j, ident("wire-finished"), Succeeded)
	n, err := j.DeleteExpired(bg, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = j.RetentionTotals(bg)
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"insert", "update", "find", "delete", "createIndexes"} {
		assert.Positive(t, names[name], "no %s was sent", name)
	}
	for _, c := range cmds {
		name := c.Index(0).Key()
		if name == "find" {
			level, err := c.LookupErr("readConcern", "level")
			require.NoError(t, err, "find without a read concern: %s", c)
			assert.Equal(t, "majority", level.StringValue())
			if mode, err := c.LookupErr("$readPreference", "mode"); err == nil {
				assert.Equal(t, "primary", mode.StringValue())
			}
			continue
		}
		w, err := c.LookupErr("writeConcern", "w")
		require.NoError(t, err, "%s without a write concern: %s", name, c)
		assert.Equal(t, "majority", w.StringValue())
		jv, err := c.LookupErr("writeConcern", "j")
		require.NoError(t, err, "%s: no j", name)
		assert.True(t, jv.Boolean())
		_, err = c.LookupErr("writeConcern", "wtimeout")
		assert.Error(t, err, "%s: a wtimeout the driver cannot send", name)
		_, err = c.LookupErr("txnNumber")
		assert.Error(t, err, "%s: a retryable write", name)
		assert.Empty(t, unique.IDOnlyUpserts(c), "%s: an upsert of the _id alone has several winners on a row-locking engine", name)
	}
}
