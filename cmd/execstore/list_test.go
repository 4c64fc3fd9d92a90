package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/internal/testserver"
)

// TestList checks `list`: every execution in id order, the filters (statuses as a comma
// list and repeated, case-insensitive; definition; roots), and keyset paging that follows
// the printed cursor or resumes after a plain id.
func TestList(t *testing.T) {
	f := populate(t)

	require.Equal(t, withoutCommitTimes(`ID       DEFINITION  STATUS   PARENT   VERSION  CREATED                   UPDATED
order-1  checkout    RUNNING  -        3        2026-01-01T00:00:00.000Z  2026-01-01T00:00:00.000Z
order-2  checkout    DONE     -        1        2026-01-01T00:00:00.000Z  2026-01-01T00:00:00.000Z
ship-1   shipping    RUNNING  order-1  2        2026-01-01T00:00:00.000Z  2026-01-01T00:00:00.000Z

3 executions; last page
`), withoutCommitTimes(f.inspect(t, "list")))

	ids := func(args ...string) []string {
		var page inspect.ExecutionPage
		require.NoError(t, json.Unmarshal([]byte(f.inspect(t, append([]string{"list", "-json"}, args...)...)), &page))
		var out []string
		for _, s := range page.Items {
			out = append(out, s.ID)
		}
		return out
	}
	require.Equal(t, []string{"order-1", "ship-1"}, ids("-status", "running"))
	require.Equal(t, []string{"order-1", "order-2", "ship-1"}, ids("-status", "RUNNING,done"))
	require.Equal(t, []string{"order-1", "order-2", "ship-1"}, ids("-status", "RUNNING", "-status", "DONE"))
	require.Equal(t, []string{"ship-1"}, ids("-definition", "shipping"))
	require.Equal(t, []string{"order-1", "order-2"}, ids("-roots"))
	require.Equal(t, []string{"order-1"}, ids("-roots", "-status", "RUNNING", "-definition", "checkout"))
	require.Nil(t, ids("-definition", "none-such"))
	require.Equal(t, "no executions\n", f.inspect(t, "list", "-definition", "none-such"))

	// Paging: the human output names the next page's flag; -json gives the cursor.
	require.Equal(t, withoutCommitTimes(`ID       DEFINITION  STATUS   PARENT  VERSION  CREATED                   UPDATED
order-1  checkout    RUNNING  -       3        2026-01-01T00:00:00.000Z  2026-01-01T00:00:00.000Z

1 execution; next page: -after AW9yZGVyLTE
`), withoutCommitTimes(f.inspect(t, "list", "-limit", "1")))
	require.JSONEq(t, `{"items": [{"id": "order-2", "definition": "checkout", "status": "DONE", "version": 1,
		"created_at": "<time>", "updated_at": "<time>"}],
		"next_cursor": "AW9yZGVyLTI"}`, withoutCommitTimes(f.inspect(t, "list", "-json", "-limit", "1", "-after", "AW9yZGVyLTE")))
	var seen []string
	cursor := ""
	for range 4 {
		var page inspect.ExecutionPage
		require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "list", "-json", "-limit", "2", "-after", cursor)), &page))
		for _, s := range page.Items {
			seen = append(seen, s.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{"order-1", "order-2", "ship-1"}, seen)
	require.Equal(t, []string{"ship-1"}, ids("-after", "order-2")) // a plain id
}

// TestOutbox checks `outbox`: the pending entries across executions, oldest seq first,
// cut at -limit with the total still counted.
func TestOutbox(t *testing.T) {
	f := populate(t)

	require.Equal(t, withoutCommitTimes(`outbox: 3 pending in 1 execution
  SEQ  SOURCE   VERSION  TARGET  COMMITTED  EVENT
  1    order-1  2        ship-1  <time>  28 bytes, JSON: {"id":"evt-2","type":"ship"}
  2    order-1  2        -       <time>  64 bytes, text: "a plain text notification that is rather longer "…
  3    order-1  3        audit   <time>  4 bytes, binary, base64: AAH+/w==
`), withoutCommitTimes(f.inspect(t, "outbox")))
	require.Equal(t, withoutCommitTimes(`outbox: 3 pending in 1 execution; the oldest 1
  SEQ  SOURCE   VERSION  TARGET  COMMITTED  EVENT
  1    order-1  2        ship-1  <time>  28 bytes, JSON: {"id":"evt-2","type":"ship"}
`), withoutCommitTimes(f.inspect(t, "outbox", "-limit", "1")))
	require.JSONEq(t, `{"pending": 3, "executions": 1, "entries": [
		{"seq": 1, "source": "order-1", "version": 2, "target": "ship-1", "committed_at": "<time>",
		 "event": {"bytes": 28, "kind": "json", "json": {"id": "evt-2", "type": "ship"}}}]}`,
		withoutCommitTimes(f.inspect(t, "outbox", "-json", "-limit", "1")))

	empty := populateNothing(t)
	require.Equal(t, "outbox: none pending\n", empty.inspect(t, "outbox"))
	require.JSONEq(t, `{"pending": 0, "executions": 0, "entries": []}`, empty.inspect(t, "outbox", "-json"))
}

// TestTimers checks `timers`: the due timers, then the next ones, across executions, by
// fire time; -limit stops the listing and says that more may follow.
func TestTimers(t *testing.T) {
	f := populate(t)

	require.Equal(t, `timers: 1 due, 2 upcoming (now 2030-03-17T17:30:00Z)
  EXECUTION  PATH           FIRE AT               FROM NOW      DUE
  order-1    Cart.Expiry    2023-11-14T22:13:20Z  2314d19h ago  due
  order-1    Paid.Reminder  2030-03-17T17:46:40Z  in 16m40s
  ship-1     Ship.Deadline  2030-03-17T18:46:40Z  in 1h16m
`, f.inspect(t, "timers"))
	require.Equal(t, `timers: 1 due, 1 upcoming; more later (-limit N shows more) (now 2030-03-17T17:30:00Z)
  EXECUTION  PATH           FIRE AT               FROM NOW      DUE
  order-1    Cart.Expiry    2023-11-14T22:13:20Z  2314d19h ago  due
  order-1    Paid.Reminder  2030-03-17T17:46:40Z  in 16m40s
`, f.inspect(t, "timers", "-limit", "2"))
	require.JSONEq(t, `{"now": "2030-03-17T17:30:00Z", "due": 1, "has_more": true, "timers": [
		{"execution": "order-1", "path": "Cart.Expiry", "fire_at": "2023-11-14T22:13:20Z",
		 "fire_at_unix": 1700000000, "in_seconds": -199999000, "due": true}]}`,
		f.inspect(t, "timers", "-json", "-limit", "1"))

	require.Equal(t, "timers: none (now 2030-03-17T17:30:00Z)\n", populateNothing(t).inspect(t, "timers"))
}

// populateNothing is a fixture whose database holds nothing.
func populateNothing(t *testing.T) fixture {
	return fixture{db: testDatabase(t)}
}

// TestListDirect calls the core of `list` directly, over a database handle and a writer,
// as any caller of the package's functions may.
func TestListDirect(t *testing.T) {
	f := populate(t)
	db := testserver.Collection(t, srv.URI, f.db, "executions").Database()
	var out bytes.Buffer
	err := listExecutions(context.Background(), db, &out, listOptions{output: output{Now: testNow},
		Collection: "executions", Definition: "shipping", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, "ID  DEFINITION  STATUS  PARENT  VERSION  CREATED  UPDATED\nship-1  shipping  RUNNING  order-1  2  <time>  <time>\n\n1 execution; last page\n",
		withoutCommitTimes(out.String()))
}
