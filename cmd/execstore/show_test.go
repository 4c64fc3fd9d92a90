package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// showOrder1 is `show order-1` of the fixture.
const showOrder1 = `execution   order-1
definition  checkout
status      RUNNING
parent      (root)
version     3
created     2026-01-01T00:00:00.000Z
updated     2026-01-01T00:00:00.000Z
data        18 bytes, JSON: {"state":"packed"}

outbox: 3 pending
  SEQ  VERSION  TARGET  COMMITTED  EVENT
  1    2        ship-1  2026-01-01T00:00:00.000Z  28 bytes, JSON: {"id":"evt-2","type":"ship"}
  2    2        -       2026-01-01T00:00:00.000Z  64 bytes, text: "a plain text notification that is rather longer "…
  3    3        audit   2026-01-01T00:00:00.000Z  4 bytes, binary, base64: AAH+/w==
  pending: not acked yet (not delivered, in a handler, or delivered with its ack on the way)

timers: 2 (now 2030-03-17T17:30:00Z)
  PATH           FIRE AT               FROM NOW      DUE
  Cart.Expiry    2023-11-14T22:13:20Z  2314d19h ago  due
  Paid.Reminder  2030-03-17T17:46:40Z  in 16m40s

spawns: 1 pending
  SEQ  VERSION  CHILD   ROOT PATH  CONTEXT
  1    2        ship-1  Fork.A     {"items":2,"warehouse":"w-3"}

trace: 2 kept, next index 2
  INDEX  AT                        STEP
  0      2026-01-01T00:00:00.000Z  {"event":"evt-1","from":"cart","to":"paid"}
  1      2026-01-01T00:00:00.000Z  {"from":"paid","to":"packed"}

dedupe set: 2 event ids (-dedupe lists them)
`

// commitTimes matches the times commits stamp, which the fixture cannot choose.
var commitTimes = regexp.MustCompile(`\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z`)

// withoutCommitTimes is out with every commit time replaced by one fixed time and the
// columns' padding collapsed (a time of whole seconds is printed shorter), so that output
// whose times vary compares equal. Other times (fire times, now) are in 2023 and 2030.
func withoutCommitTimes(out string) string {
	out = commitTimes.ReplaceAllStringFunc(out, func(s string) string {
		if strings.HasPrefix(s, "2023-") || strings.HasPrefix(s, "2030-") {
			return s
		}
		return "<time>"
	})
	out = regexp.MustCompile(`<time> \([^)]*\)`).ReplaceAllString(out, "<time>") // how long ago: by the wall clock
	return regexp.MustCompile(`  +`).ReplaceAllString(out, "  ")
}

// TestShow checks `show` of executions written through aio: a JSON snapshot with its
// outbox (JSON, text and binary events, one without a target), timers (one due, by the
// tests' now), a spawn, the trace and the dedupe set; a binary snapshot with nothing
// pending; a child with a text snapshot.
func TestShow(t *testing.T) {
	f := populate(t)

	require.Equal(t, withoutCommitTimes(showOrder1), withoutCommitTimes(f.inspect(t, "show", "order-1")))

	// Flags after the id, the last trace step only, the dedupe set listed.
	require.Equal(t, withoutCommitTimes(`trace: 2 kept, next index 2; the last 1 (-trace N shows more)
  INDEX  AT                        STEP
  1      2026-01-01T00:00:00.000Z  {"from":"paid","to":"packed"}

dedupe set: 2 event ids
  evt-1
  evt-2
`), withoutCommitTimes(after(t, f.inspect(t, "show", "order-1", "-trace", "1", "-dedupe"), "trace:")))

	require.Equal(t, withoutCommitTimes(`execution   order-2
definition  checkout
status      DONE
parent      (root)
version     1
created     2026-01-01T00:00:00.000Z
updated     2026-01-01T00:00:00.000Z
data        4 bytes, binary, base64: //4AEA==

outbox: none pending

timers: none (now 2030-03-17T17:30:00Z)

spawns: none pending

trace: none kept, next index 0

dedupe set: 0 event ids
`), withoutCommitTimes(f.inspect(t, "show", "-dedupe", "order-2")))
}

// TestShowJSON checks `show -json`: every field, with stable names, empty lists as [], absent
// fields (no parent, no target, no dedupe list unless asked) left out, and an outbox event in
// the snapshot's shape, whole.
func TestShowJSON(t *testing.T) {
	f := populate(t)

	require.JSONEq(t, `{
  "id": "order-1", "definition": "checkout", "status": "RUNNING", "version": 3,
  "trace_next": 2, "created_at": "<time>", "updated_at": "<time>",
  "data": {"bytes": 18, "kind": "json", "json": {"state": "packed"}},
  "now": "2030-03-17T17:30:00Z",
  "outbox": [
    {"seq": 1, "version": 2, "target": "ship-1", "committed_at": "<time>",
     "event": {"bytes": 28, "kind": "json", "json": {"id": "evt-2", "type": "ship"}}},
    {"seq": 2, "version": 2, "committed_at": "<time>",
     "event": {"bytes": 64, "kind": "text", "text": "a plain text notification that is rather longer than any preview"}},
    {"seq": 3, "version": 3, "target": "audit", "committed_at": "<time>",
     "event": {"bytes": 4, "kind": "binary", "base64": "AAH+/w=="}}
  ],
  "timers": [
    {"path": "Cart.Expiry", "fire_at": "2023-11-14T22:13:20Z", "fire_at_unix": 1700000000, "in_seconds": -199999000, "due": true},
    {"path": "Paid.Reminder", "fire_at": "2030-03-17T17:46:40Z", "fire_at_unix": 1900000000, "in_seconds": 1000, "due": false}
  ],
  "spawns": [{"seq": 1, "version": 2, "child": "ship-1", "root_path": "Fork.A", "context": {"items": 2, "warehouse": "w-3"}}],
  "trace_kept": 2,
  "trace": [{"index": 1, "fields": {"from": "paid", "to": "packed"}, "at": "<time>"}],
  "dedupe_size": 2,
  "dedupe": ["evt-1", "evt-2"]
}`, withoutCommitTimes(f.inspect(t, "show", "order-1", "-json", "-trace", "1", "-dedupe")))

	require.JSONEq(t, `{
  "id": "ship-1", "definition": "shipping", "status": "RUNNING", "parent": "order-1", "version": 2,
  "trace_next": 0, "created_at": "<time>", "updated_at": "<time>",
  "data": {"bytes": 29, "kind": "text", "text": "label printed\nawaiting pickup"},
  "now": "2030-03-17T17:30:00Z",
  "outbox": [],
  "timers": [{"path": "Ship.Deadline", "fire_at": "2030-03-17T18:46:40Z", "fire_at_unix": 1900003600, "in_seconds": 4600, "due": false}],
  "spawns": [],
  "trace_kept": 0,
  "trace": [],
  "dedupe_size": 0
}`, withoutCommitTimes(f.inspect(t, "-json", "show", "ship-1")))
}

// after returns s from the first line that starts with prefix.
func after(t *testing.T, s, prefix string) string {
	t.Helper()
	if strings.HasPrefix(s, prefix) {
		return s
	}
	i := strings.Index(s, "\n"+prefix)
	require.GreaterOrEqual(t, i, 0, "no line starts with %q in:\n%s", prefix, s)
	return s[i+1:]
}
