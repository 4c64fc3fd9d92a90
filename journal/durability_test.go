package journal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// hello replies, as Extended JSON, of the deployments Open meets. The FerretDB one is what
// the embedded server answers; the MongoDB ones have the fields the MongoDB manual documents
// for hello on a standalone mongod, a replica set member and a mongos (hosts: the members
// neither hidden, passive nor arbiters; passives: the priority-0 members, voting or not;
// arbiters: the arbiters; hidden members in none of them).
const (
	helloFerretDB = `{"isWritablePrimary":true,"maxBsonObjectSize":16777216,"maxMessageSizeBytes":48000000,
		"maxWriteBatchSize":100000,"localTime":{"$date":"2026-12-01T09:26:13.551Z"},
		"logicalSessionTimeoutMinutes":30,"connectionId":42,"minWireVersion":0,"maxWireVersion":21,
		"readOnly":false,"ok":1.0}`
	helloStandalone = `{"isWritablePrimary":true,
		"topologyVersion":{"processId":{"$oid":"6745f1c2a1b2c3d4e5f60718"},"counter":0},
		"maxBsonObjectSize":16777216,"maxMessageSizeBytes":48000000,"maxWriteBatchSize":100000,
		"localTime":{"$date":"2026-12-01T09:30:00Z"},"logicalSessionTimeoutMinutes":30,
		"connectionId":7,"minWireVersion":0,"maxWireVersion":21,"readOnly":false,"ok":1.0}`
	helloSetOfOne = `{"topologyVersion":{"processId":{"$oid":"6745f1c2a1b2c3d4e5f60719"},"counter":6},
		"hosts":["db0.example.net:27017"],"setName":"rs0","setVersion":1,
		"isWritablePrimary":true,"secondary":false,"primary":"db0.example.net:27017",
		"me":"db0.example.net:27017","electionId":{"$oid":"7fffffff0000000000000001"},
		"maxBsonObjectSize":16777216,"maxMessageSizeBytes":48000000,"maxWriteBatchSize":100000,
		"localTime":{"$date":"2026-12-01T09:30:00Z"},"logicalSessionTimeoutMinutes":30,
		"connectionId":9,"minWireVersion":0,"maxWireVersion":21,"readOnly":false,"ok":1.0}`
	helloSetOfThree = `{"topologyVersion":{"processId":{"$oid":"6745f1c2a1b2c3d4e5f6071a"},"counter":6},
		"hosts":["db0.example.net:27017","db1.example.net:27017","db2.example.net:27017"],
		"setName":"rs0","setVersion":3,"isWritablePrimary":true,"secondary":false,
		"primary":"db0.example.net:27017","me":"db0.example.net:27017",
		"electionId":{"$oid":"7fffffff0000000000000002"},"maxBsonObjectSize":16777216,
		"maxMessageSizeBytes":48000000,"maxWriteBatchSize":100000,
		"localTime":{"$date":"2026-12-01T09:30:00Z"},"logicalSessionTimeoutMinutes":30,
		"connectionId":11,"minWireVersion":0,"maxWireVersion":21,"readOnly":false,"ok":1.0}`
	helloTwoAndArbiter = `{"hosts":["db0.example.net:27017","db1.example.net:27017"],
		"arbiters":["arb.example.net:27017"],"setName":"rs0","setVersion":2,
		"isWritablePrimary":true,"secondary":false,"primary":"db0.example.net:27017",
		"me":"db0.example.net:27017","maxWireVersion":21,"minWireVersion":0,"ok":1.0}`
	helloOneAndTwoArbiters = `{"hosts":["db0.example.net:27017"],
		"arbiters":["arb0.example.net:27017","arb1.example.net:27017"],"setName":"rs0","setVersion":2,
		"isWritablePrimary":true,"secondary":false,"primary":"db0.example.net:27017",
		"me":"db0.example.net:27017","maxWireVersion":21,"minWireVersion":0,"ok":1.0}`
	helloOneAndPassives = `{"hosts":["db0.example.net:27017"],
		"passives":["dr0.example.net:27017","dr1.example.net:27017"],"setName":"rs0","setVersion":4,
		"isWritablePrimary":true,"secondary":false,"primary":"db0.example.net:27017",
		"me":"db0.example.net:27017","maxWireVersion":21,"minWireVersion":0,"ok":1.0}`
	helloTwoAndPassive = `{"hosts":["db0.example.net:27017","db1.example.net:27017"],
		"passives":["dr0.example.net:27017"],"setName":"rs0","setVersion":4,
		"isWritablePrimary":true,"secondary":false,"primary":"db0.example.net:27017",
		"me":"db0.example.net:27017","maxWireVersion":21,"minWireVersion":0,"ok":1.0}`
	helloMongos = `{"isWritablePrimary":true,"msg":"isdbgrid",
		"topologyVersion":{"processId":{"$oid":"6745f1c2a1b2c3d4e5f6071b"},"counter":0},
		"maxBsonObjectSize":16777216,"maxMessageSizeBytes":48000000,"maxWriteBatchSize":100000,
		"localTime":{"$date":"2026-12-01T09:30:00Z"},"logicalSessionTimeoutMinutes":30,
		"connectionId":3,"maxWireVersion":21,"minWireVersion":0,"ok":1.0}`
)

// Open's durability rule, a function of the hello reply alone: w: "majority" must wait for
// at least two data-bearing voting members, which hello shows only through hosts (arbiters
// hold no data; a passive member may not vote; hidden members are not listed). A mongos is
// accepted. AcceptWeakDurability accepts anything.
func TestDurabilityFromHello(t *testing.T) {
	for _, tc := range []struct {
		name, hello string
		weak        bool   // refused unless accepted
		why         string // in the refusal
	}{
		{"FerretDB", helloFerretDB, true, "standalone"},
		{"standalone mongod", helloStandalone, true, "standalone"},
		{"replica set of one", helloSetOfOne, true, "1 voting data-bearing member"},
		{"replica set of three", helloSetOfThree, false, ""},
		{"two data members and an arbiter", helloTwoAndArbiter, false, ""},
		{"one data member and two arbiters", helloOneAndTwoArbiters, true, "arbiters"},
		{"one member and two passives", helloOneAndPassives, true, "passive"},
		{"two members and a passive", helloTwoAndPassive, false, ""},
		{"mongos", helloMongos, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hello bson.Raw
			require.NoError(t, bson.UnmarshalExtJSON([]byte(tc.hello), false, &hello))
			err := durableByHello(hello, false)
			if !tc.weak {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, execstore.ErrInvalid)
				var ie *execstore.InvalidError
				require.ErrorAs(t, err, &ie)
				assert.Contains(t, err.Error(), tc.why)
				assert.Contains(t, err.Error(), "AcceptWeakDurability")
			}
			require.NoError(t, durableByHello(hello, true), "accepted")
		})
	}

	// A reply that does not say what the server is, is not taken for a durable one.
	var bad bson.Raw
	require.NoError(t, bson.UnmarshalExtJSON([]byte(`{"setName":"rs0","hosts":"db0:27017","ok":1.0}`), false, &bad))
	require.Error(t, durableByHello(bad, false))
}
