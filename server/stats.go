package server

// Stats are the counters every store of the module keeps. Each store's Stats embeds them
// beside its own.
type Stats struct {
	Queued   int                // requests waiting for a worker
	InFlight int                // operations running
	Ops      map[string]OpStats // by operation name ("commit", "claim", …)
	// OutcomeUnknown counts the writes whose outcome is unknown (execstore.ErrOutcomeUnknown).
	OutcomeUnknown int64
	// Overloaded counts the calls refused by Connection.ShedLoad (execstore.ErrOverloaded).
	Overloaded int64
	// ServerCommands counts the commands sent to the server by a client the store's Open made
	// (0 with OpenClient, whose client is the caller's).
	ServerCommands int64
}

// OpStats counts one kind of operation.
type OpStats struct {
	Calls  int64 // completed calls, failed ones included
	Errors int64 // calls that returned an error
}
