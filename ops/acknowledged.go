package ops

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// ErrUnacknowledged is CheckAcknowledged's answer for a collection whose writes are not
// acknowledged.
var ErrUnacknowledged = errors.New("execstore: writes are unacknowledged (w: 0)")

// CheckAcknowledged reports whether writes through coll are acknowledged, with the write
// concern they will actually be sent with (the driver cannot say which one a collection
// inherited from its client). One update that changes nothing: it matches no document.
func CheckAcknowledged(ctx context.Context, coll *mongo.Collection) error {
	res, err := coll.UpdateOne(ctx, bson.D{{Key: fID, Value: probeID}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "probe", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("execstore: checking the write concern: %w", err)
	}
	if !res.Acknowledged {
		return ErrUnacknowledged
	}
	return nil
}

// probeID is the _id CheckAcknowledged's update looks for; no document has it.
const probeID = "execstore write concern probe"
