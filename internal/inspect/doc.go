// Package inspect reads what an execstore database holds, for people: an execution with its
// outbox, timers, spawns, dead items, trace and dedupe set; pages of executions; the pending
// outbox and the timers across executions; the backlog per partition; idempotency records;
// the relays sharing the partitions; a journal invocation's metadata.
//
// Every function only reads: it sends finds, aggregates and the server's identification,
// never a write of any kind, not even an index creation, so it works on the documents
// directly rather than through the stores. Each returns a report, a struct whose JSON field
// names are stable: the command execstore prints them with -json, and package ui serves them
// as ?format=json. A claim token, a response's header values and a journal's sealed payloads
// are never read into a report; bodies only when asked.
package inspect
