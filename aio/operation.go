package aio

import "context"

// operationKey is the context key under which the store names the operation a command serves.
type operationKey struct{}

// withOperation returns ctx naming kind as the operation its commands serve.
func withOperation(ctx context.Context, kind opKind) context.Context {
	return context.WithValue(ctx, operationKey{}, kind)
}

// OperationOf returns the name of the store operation a server command sent with ctx serves,
// as Stats.Ops names them: "commit", "load", "load_for_event", "ack_outbox", "delete_timer",
// and so on, "wake" for the reads and writes of the relays' board (see Options.DisableRemoteWakes);
// "" for a command sent for no operation (Open's, a seq block reserved ahead of need). A batch
// of several operations (a group commit, coalesced acks and timer deletes) is named by its
// first.
//
// A command monitor (ClientOptions.SetMonitor) is given each command's context, so it can
// count apart the commands a handler waits for (its loads and commits) and those the store
// sends on a relay's behalf (the acks and timer deletes no commit carried).
func OperationOf(ctx context.Context) string {
	if k, ok := ctx.Value(operationKey{}).(opKind); ok && k >= 0 && k < opKinds {
		return opNames[k]
	}
	return ""
}
