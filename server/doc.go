// Package server holds what the module's MongoDB-backed stores (aio, idem, journal) share:
//   - Connection is how they reach and load the server. Each store's Options embeds it.
//   - Info is what they learn of the server at Open: its Family, its versions, and the
//     Profile of formulations they use on it.
//   - Stats holds the counters every store keeps. Each store's Stats embeds it.
//
// What always holds:
//   - A zero Connection is ready to use. Every field documents its default. The module works
//     them all out in one place, for every store alike.
//   - A store's Open refuses, before any I/O, a URI or a setting it cannot honour. The error
//     is an *execstore.InvalidError naming the field.
//   - Open is bounded by its context's deadline, or else by Connection.ConnectTimeout. When it
//     cannot reach the server, its error names the address, never the credentials. The
//     error matches ErrConnectionRefused, ErrNoAnswer, ErrNotMongoDB or ErrAuthFailed when
//     the server's answer (or its silence) tells which.
//   - Every store identifies its server at Open with the same two commands, hello and
//     buildInfo. It refuses a server older than MongoDB 4.4, whatever the Profile, with
//     execstore.ErrInvalid.
//   - What the server does, not its Family, picks the formulations. A store whose Profile is
//     not forced probes the features its MongoDB formulation relies on, with commands that
//     change nothing. Where one is refused, it uses its FerretDB formulation, which is
//     correct on every server. A probe that fails for any other reason (network,
//     authentication, a deadline) fails Open: it never picks a formulation.
package server
