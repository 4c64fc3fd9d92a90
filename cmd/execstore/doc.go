// Command execstore shows what an execstore database holds, to answer "what happened to
// execution X?". It shows:
//   - an execution's snapshot, pending outbox entries, timers, spawn intents, trace and
//     dedupe set;
//   - executions, a page at a time;
//   - the pending outbox, the timers and the dead items across executions;
//   - the backlog: the work waiting per partition, and what retention deleted;
//   - an idempotency record (package idem), and the records under a key prefix, a page at
//     a time;
//   - the relays sharing the partitions (package relay): the relays registered, and each
//     partition's lease;
//   - a journal invocation's metadata (package journal).
//
// Usage:
//
//	execstore [flags] COMMAND [flags] [ARG]
//
//	execstore show ID           one execution
//	execstore list              executions, filtered (-status, -definition, -roots), a page at
//	                            a time (-limit, -after CURSOR or ID), by id or by when each
//	                            was created or last updated (-sort created|updated, -desc)
//	execstore outbox            the oldest pending outbox entries (-limit)
//	execstore dead              the dead items, newest first by last error (-kind,
//	                            -execution, -definition, -error, -older-than, -limit)
//	execstore revive            put dead items back to pending (-item, or dead's filters,
//	                            or -all; -yes to write)
//	execstore discard           drop dead items for good (the same flags)
//	execstore timers            the due timers and the next ones (-limit)
//	execstore backlog           per partition: pending entries and intents, the oldest's age,
//	                            due timers and the most overdue's lag, dead items; totals;
//	                            executions deleted for retention by status
//	execstore ui                the same as a web UI (-listen 127.0.0.1:8080; read-only
//	                            unless -actions; see package ui)
//	execstore idem get KEY      one idempotency record (-body prints the response's body)
//	execstore idem list PREFIX  the idempotency records whose key starts with PREFIX, a page
//	                            at a time (-limit, -after CURSOR or KEY)
//	execstore rates             what the relays and sweepers did, minute by minute
//	                            (-minutes N)
//	execstore relays            the relays registered under a lease key (-lease-key) and each
//	                            partition's lease: held or not, its end, take-overs
//	execstore journal show ID   one invocation's metadata, never its sealed payloads
//	execstore journal list      the invocations by latest attempt state and owner, a page at
//	                            a time (-state pending|unknown|…, -owner, -limit, -after)
//	execstore server            what the server is, as the stores identify it
//
// Every command takes these flags, before or after its name:
//   - -uri URI (default $MONGODB_URI), or -embedded DIR: the embedded server (package
//     embedded), started on that data directory; a directory another embedded server
//     serves is refused.
//   - -db NAME (default "execstore").
//   - -collection NAME where the store's collection is not its default (executions,
//     idempotency, journal). The relays' leases are looked for where relays keep them:
//     "idempotency" in -db, then "idempotency" and "executions" in -db with "_leases"
//     appended; relays -collection names them in -db instead.
//   - -json for one JSON document with stable field names instead of aligned text.
//   - -timeout D (default 10s), which bounds connecting and every read.
//
// "execstore -h" and "execstore COMMAND -h" print the flags. A command group, the commands
// whose names share a first word ("execstore idem -h", "execstore help journal"), prints each
// of its commands with its summary and flags. The group's name alone is bad usage: its usage
// on standard error, exit status 2.
//
// With -json, absent fields (no parent, no target, a record's missing parts) are left out.
// Every opaque payload (a snapshot, an outbox event, a response body) has one shape,
// {"bytes": N, "kind": K, ...}. JSON is its value under "json", and a BSON document a JSON
// object under "json". Other text is a string under "text". Anything else is base64 under
// "base64", left out past 1 KiB. "execstore show -h" says so too. Fire times are RFC 3339 in
// UTC.
//
// For example:
//
//	$ execstore -uri mongodb://localhost:27017 show order-1 -trace 3
//	$ execstore list -status RUNNING,SUSPENDED -definition checkout -roots -limit 50
//	$ execstore list -after AW9yZGVyLTUw -json | jq '.items[].id'
//	$ execstore list -status RUNNING -sort updated -desc -limit 20
//	$ execstore timers -limit 20
//	$ execstore -db shop idem get req-42 -body
//	$ execstore -db shop idem list req- -limit 20
//	$ execstore -db shop_leases relays -lease-key execstore/relay/timers
//	$ execstore -embedded ./data journal show pay-order-1
//
// It only reads, but for revive and discard with -yes (and ui -actions): every other
// command sends no write command of any kind, not even an index creation. So it does not
// open the stores; revive and discard write as the stores do (execstore.DeadLetters'
// Revive and Discard), each item one guarded write that leaves an item no longer dead
// alone. It reads their documents with the driver, through the document
// model of package ops and the stored fields of idem, journal and the relays' leases (package
// internal/inspect). An outbox entry and a spawn intent record their commit's time, by the
// committer's clock: backlog measures ages from it. Timers
// are due by the local clock. Idempotency leases and retention, and the relays' leases, are
// due by the server's clock, read as package idem reads it: $$NOW in an aggregate where the
// server serves it, else hello's localTime. A journal's checkpoints, operations and receipts
// are never opened. They show as sizes and key ids. Neither a claim token nor a response's
// header values are ever printed, nor a body in a list. A relay's lease does not name its
// holder, so neither does "relays".
//
// Exit status:
//   - 0 on success.
//   - 1 when the command fails: a bad URI, an unreachable server, an unknown id or key.
//     Errors name the server's address, never the URI's credentials.
//   - 2 on bad flags or arguments, with the usage.
package main
