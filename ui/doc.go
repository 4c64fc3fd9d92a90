// Package ui is a web UI over an execstore database, read-only unless Options.Actions is
// set: an overview (executions by
// status, the backlog per partition, the relays' partitions and the worst lags), executions
// filtered and paged, one execution with its snapshot, outbox, timers, spawns, dead items,
// trace as a timeline, parent and children, the outbox and the timers oldest first, the dead
// items newest first by last error, the relays, an idempotency record and a journal
// invocation.
//
// Handler is an http.Handler to mount under any path; the command "execstore ui" serves it.
// By default it answers GET and HEAD only (405 otherwise) and sends only reads to the
// server: finds, aggregates and the server's identification, through package
// internal/inspect, as the command execstore does. With Options.Actions (which needs
// Options.User) it also takes POST /dead/act, the dead items' revive and discard: a form of
// its own pages with their CSRF token, shown for confirmation before it acts on exactly the
// items listed, each a guarded write the stores make (package internal/deadaction), its
// outcome shown and logged with the user. Every page is also JSON with ?format=json, in the shapes of
// "execstore … -json". A claim token or a response's header values are never shown; a
// snapshot, an event or a response body only on request (?body=1). Pages carry a strict
// Content-Security-Policy (scripts, styles and images from the handler only, nothing
// inline), and basic authentication when Options.User is set.
//
// The pages are html/template with the stylesheet and one small script for live refresh
// embedded: there is no front-end build.
package ui
