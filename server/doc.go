// Package server is what the module's MongoDB-backed stores (aio, idem, journal) share: how
// they reach and load the server (Connection, embedded by each store's Options), what they
// learn of it at Open (Info: its Family, its versions and the Profile of formulations they
// use on it), and the counters every one of them keeps (Stats, embedded by each store's
// Stats).
//
// What always holds:
//   - A zero Connection is ready to use; every field documents its default, and one function
//     of the module works them all out, for every store alike.
//   - Every store identifies its server at Open with the same two commands (hello and
//     buildInfo) and refuses, with execstore.ErrInvalid, a server older than MongoDB 4.4,
//     whatever the Profile.
//   - The Profile, not the Family, picks the formulations: the Family names the server.
package server
