// Package server is what the module's MongoDB-backed stores (aio, idem, journal) share: how
// they reach and load the server (Connection, embedded by each store's Options), what they
// learn of it at Open (Info: its Family, its versions and the Profile of formulations they
// use on it), and the counters every one of them keeps (Stats, embedded by each store's
// Stats).
//
// What always holds:
//   - A zero Connection is ready to use; every field documents its default, and one function
//     of the module works them all out, for every store alike.
//   - A store's Open refuses, before any I/O, a URI or a setting it cannot honour, with an
//     *execstore.InvalidError naming the field.
//   - Open is bounded: by its context's deadline, or else by Connection.ConnectTimeout. When
//     it cannot reach the server, its error names the address, never the credentials, and
//     matches ErrConnectionRefused, ErrNoAnswer, ErrNotMongoDB or ErrAuthFailed when the
//     server's answer (or its silence) tells which.
//   - Every store identifies its server at Open with the same two commands (hello and
//     buildInfo) and refuses, with execstore.ErrInvalid, a server older than MongoDB 4.4,
//     whatever the Profile.
//   - What the server does, not its Family, picks the formulations: a store whose Profile is
//     not forced probes the features its MongoDB formulation relies on, with commands that
//     change nothing, and uses its FerretDB formulation (correct on every server) where one
//     is refused. A probe that fails for any other reason (network, authentication, a
//     deadline) fails Open: it never picks a formulation.
package server
