package main

// deliveryCost is what one delivery of the backlog cost: the handler calls, the commands of
// the relay processes and the server's CPU.
type deliveryCost struct {
	deliveries int // handler calls, the redeliveries included
	// storeCommands and leaseCommands are those the relay processes' store and lease clients
	// sent, each from its relay's start to its stop: the polls and lease renewals while
	// there was nothing to deliver included. Summed over the processes that reported them:
	// commandsComplete is false when one did not (a killed process).
	storeCommands, leaseCommands commandCounts
	commandsComplete             bool
	// server is the server's CPU from the backlog committed to every entry acked; nil: not
	// measured.
	server *serverCPU
}

// costOf returns the handler calls and commands the relay processes' logs give.
func costOf(logs [][]deliveryLine) deliveryCost {
	c := deliveryCost{storeCommands: commandCounts{}, leaseCommands: commandCounts{}, commandsComplete: true}
	for _, lines := range logs {
		var last *deliveryLine
		for i, x := range lines {
			switch x.Kind {
			case "deliver":
				c.deliveries++
			case "stats":
				if x.Commands != nil || x.LeaseCommands != nil {
					last = &lines[i]
				}
			}
		}
		if last == nil {
			c.commandsComplete = false
			continue
		}
		c.storeCommands = c.storeCommands.plus(last.Commands)
		c.leaseCommands = c.leaseCommands.plus(last.LeaseCommands)
	}
	return c
}

// commands returns the relay processes' commands in all, store and lease clients together.
func (c deliveryCost) commands() int64 {
	return c.storeCommands.total() + c.leaseCommands.total()
}
