package inspect

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
)

// The clocks a report's now is read from.
const (
	ClockServer = "server" // the server's: $$NOW in an aggregate, or hello's localTime
	ClockLocal  = "local"  // this machine's: the server gave neither
)

// ServerNow reads the server's clock as package idem reads it, since that clock judges
// idempotency leases and retention and the relays' leases: $$NOW in an aggregate of no
// collection where the server serves it, else hello's localTime. It returns local, and
// ClockLocal, when the server gives neither. Both are reads: nothing is written.
func ServerNow(ctx context.Context, db *mongo.Database, local time.Time) (time.Time, string) {
	if reply, err := db.RunCommand(ctx, connect.NowInReadsCommand()).Raw(); err == nil {
		if now, err := connect.NowOf(reply); err == nil && now != 0 {
			return now.Time().UTC(), ClockServer
		}
	}
	var hello struct {
		LocalTime bson.DateTime `bson:"localTime"`
	}
	err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
	if err != nil || hello.LocalTime == 0 {
		return local, ClockLocal
	}
	return hello.LocalTime.Time().UTC(), ClockServer
}
