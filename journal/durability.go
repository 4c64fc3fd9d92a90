package journal

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/contract"
)

// checkDurable asks the server for its hello reply and applies durableByHello to it.
func checkDurable(ctx context.Context, client *mongo.Client, accept bool) error {
	hello, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	if err != nil {
		return fmt.Errorf("journal: asking the server what it is: %w", err)
	}
	return durableByHello(hello, accept)
}

// helloReply is what the durability rule reads of a hello reply.
type helloReply struct {
	SetName  string   `bson:"setName"`  // a replica set member's set
	Msg      string   `bson:"msg"`      // "isdbgrid" from a mongos
	Hosts    []string `bson:"hosts"`    // members neither hidden, passive nor arbiters
	Passives []string `bson:"passives"` // priority-0 members, not hidden
	Arbiters []string `bson:"arbiters"`
}

// durableByHello is Open's durability rule, a function of the server's hello reply alone:
// unless accept, it refuses (execstore.ErrInvalid) a deployment where a write acknowledged
// with w: "majority" may be on one node only.
//
// On a replica set, "majority" waits for a majority of the voting members, but for no more
// than the voting members that hold data (replSetGetStatus reports that count as
// writeMajorityCount; hello does not). Of what hello lists, only hosts is known to be both
// voting and data-bearing: a member whose priority is above 0 has a vote, and hosts lists
// exactly the members that are neither passive (priority 0), hidden nor arbiters. Arbiters
// vote but hold no data; a passive member may have no vote; hidden members are not listed at
// all. So a replica set is accepted when hosts lists at least two members (the write
// majority is then at least two nodes whatever the other members are), and refused
// otherwise, even when a passive or hidden member would in fact make a second vote: hello
// cannot show it, and the rule fails closed.
//
// A standalone server (no setName; FerretDB among them) is refused. A mongos (msg
// "isdbgrid") is accepted: its hello does not describe the shards, which are replica sets
// of their own that this rule cannot see.
func durableByHello(hello bson.Raw, accept bool) error {
	if accept {
		return nil
	}
	var h helloReply
	if err := bson.Unmarshal(hello, &h); err != nil {
		return fmt.Errorf("journal: reading the server's hello reply: %w", err)
	}
	const fix = "; use a replica set with at least two data-bearing members of priority above 0, " +
		"or set Options.AcceptWeakDurability to accept it"
	switch {
	case h.Msg == "isdbgrid":
		return nil
	case h.SetName == "":
		return contract.Invalid("server", "is a standalone server: w: \"majority\" would mean one node"+fix)
	case len(h.Hosts) >= 2:
		return nil
	}
	reason := fmt.Sprintf("is replica set %q, whose hello lists %d voting data-bearing member%s (hosts)",
		h.SetName, len(h.Hosts), plural(len(h.Hosts)))
	var others []string
	if n := len(h.Arbiters); n > 0 {
		others = append(others, fmt.Sprintf("%d arbiter%s, which hold%s no data", n, plural(n), verbS(n)))
	}
	if n := len(h.Passives); n > 0 {
		others = append(others, fmt.Sprintf("%d passive member%s, which may not vote", n, plural(n)))
	}
	if len(others) > 0 {
		reason += " besides " + strings.Join(others, " and ")
	}
	return contract.Invalid("server", "%s: w: \"majority\" may mean one node%s", reason, fix)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}
