package main

import "time"

// deliveryCost is what one delivery of the backlog cost: the handler calls, the commands of
// the relay processes and the server's CPU.
type deliveryCost struct {
	deliveries int // handler calls, the redeliveries included
	// storeCommands and leaseCommands are those the relay processes' store and lease clients
	// sent in the delivery's window, the server CPU's: from the backlog committed to every
	// entry acked, widened to the processes' "commands" lines around it (up to
	// commandsEvery at each end). The polls and lease renewals meanwhile are included; the
	// partitions' sharing-out before the backlog and the releases at the stop are not.
	// Summed over the processes that reported them: commandsComplete is false when one did
	// not (a killed process).
	storeCommands, leaseCommands commandCounts
	// operations are storeCommands by the operation each served (aio.OperationOf).
	operations       commandCounts
	commandsComplete bool
	// server is the server's CPU from the backlog committed to every entry acked; nil: not
	// measured.
	server *serverCPU
}

// commandsEvery is how often a relay process logs its commands while they change.
const commandsEvery = 100 * time.Millisecond

// costOf returns the handler calls the relay processes' logs give, and the commands they
// sent between from and to (Unix nanoseconds): per process, its counts on the first
// "commands" line at or after to (a process logs one as it is told to stop, before the stop's
// releases of its leases; else its final "stats" line), less those on its last line before
// from.
func costOf(logs [][]deliveryLine, from, to int64) deliveryCost {
	c := deliveryCost{storeCommands: commandCounts{}, leaseCommands: commandCounts{}, operations: commandCounts{}, commandsComplete: true}
	for _, lines := range logs {
		var base, end *deliveryLine
		for i, x := range lines {
			switch {
			case x.Kind == "deliver":
				c.deliveries++
			case x.Commands == nil && x.LeaseCommands == nil:
			case x.End < from:
				base = &lines[i]
			case end == nil && (x.End >= to || x.Kind == "stats"):
				end = &lines[i]
			}
		}
		if end == nil {
			c.commandsComplete = false
			continue
		}
		store, lease, ops := commandCounts(end.Commands), commandCounts(end.LeaseCommands), commandCounts(end.Operations)
		if base != nil {
			store, lease, ops = store.since(base.Commands), lease.since(base.LeaseCommands), ops.since(base.Operations)
		}
		c.storeCommands = c.storeCommands.plus(store)
		c.leaseCommands = c.leaseCommands.plus(lease)
		c.operations = c.operations.plus(ops)
	}
	return c
}

// commands returns the relay processes' commands in all, store and lease clients together.
func (c deliveryCost) commands() int64 {
	return c.storeCommands.total() + c.leaseCommands.total()
}
