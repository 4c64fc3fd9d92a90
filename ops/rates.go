package ops

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// RatesCollectionOf is the collection of an executions collection's rate samples
// (execstore.RateRecording): one document per member and minute, RateDoc, keyed by
// rateKey.
func RatesCollectionOf(executions string) string { return executions + "_rates" }

// rateMinute is how a rateKey writes its minute: its order is time's.
const rateMinute = "2006-01-02T15:04"

// RateDoc is one member's sample of one minute: its totals when the minute's first record
// began (the least From) and at its last (the greatest To), and the longest wait.
type RateDoc struct {
	ID        string        `bson:"_id"`
	Component string        `bson:"c"`
	Member    string        `bson:"m"`
	Minute    time.Time     `bson:"t"`
	From      RateTotalsDoc `bson:"from"`
	To        RateTotalsDoc `bson:"to"`
	AgeMillis int64         `bson:"a"` // the longest oldest wait, in milliseconds
}

// RateTotalsDoc are a member's totals as a RateDoc keeps them.
type RateTotalsDoc struct {
	Delivered int64 `bson:"d"`
	Failed    int64 `bson:"f"`
	Dead      int64 `bson:"x"`
}

// rateKey is the _id of member's sample of minute (UTC, whole minutes) of component: the
// minute first, so the samples of a span of minutes are one range of _id.
func rateKey(minute time.Time, component, member string) string {
	return minute.UTC().Format(rateMinute) + "/" + component + "/" + member
}

// RatesFrom is the filter of the samples from minute on, on the _id index.
func RatesFrom(minute time.Time) bson.D {
	return bson.D{{Key: fID, Value: bson.D{{Key: "$gte", Value: minute.UTC().Format(rateMinute)}}}}
}

// RatesBefore is the filter of the samples of the minutes before minute, on the _id index.
func RatesBefore(minute time.Time) bson.D {
	return bson.D{{Key: fID, Value: bson.D{{Key: "$lt", Value: minute.UTC().Format(rateMinute)}}}}
}

// RecordRateCommand is the updateOne, an upsert by _id, that records into member's sample of
// minute its totals from and to: $min of from, $max of to and of the age, the names and the
// minute set on insert. Applied twice it changes nothing more, so a record whose outcome
// was unknown is sent again as it was. Only the member writes its samples, one write at a
// time, so the upsert never races another on its _id.
func RecordRateCommand(minute time.Time, component, member string, from, to RateTotalsDoc, ageMillis int64) (filter, update bson.D) {
	return bson.D{{Key: fID, Value: rateKey(minute, component, member)}}, bson.D{
		{Key: "$min", Value: bson.D{{Key: "from.d", Value: from.Delivered}, {Key: "from.f", Value: from.Failed}, {Key: "from.x", Value: from.Dead}}},
		{Key: "$max", Value: bson.D{{Key: "to.d", Value: to.Delivered}, {Key: "to.f", Value: to.Failed}, {Key: "to.x", Value: to.Dead},
			{Key: "a", Value: ageMillis}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "c", Value: component}, {Key: "m", Value: member}, {Key: "t", Value: minute.UTC()}}},
	}
}
