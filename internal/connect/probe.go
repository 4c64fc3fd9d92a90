package connect

// Probes ask the server, with commands that change nothing, whether it serves a feature a
// store's MongoDB formulation relies on. A server that refuses a feature answers with an
// error reply at parse time, whether or not the command matches a document (measured on
// FerretDB 1.24 and on FerretDB 2.5 / DocumentDB 0.106), so every write probed here matches
// no document: its filter is {_id: {$in: []}}.

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/server"
)

// refusalCodes are the error codes with which a server refuses a command it does not serve
// as written: BadValue, FailedToParse, TypeMismatch, IllegalOperation, CommandNotFound,
// InvalidOptions, CommandNotSupported, InvalidPipelineOperator, NotImplemented, APIStrictError
// (a client with a strict Stable API is refused what the API leaves out), MongoDB's "use of
// undefined variable" (17276: $$NOW before 4.2) and "unrecognized pipeline stage" (40324:
// $documents before 5.1), and "$changeStream only on replica sets" (40573: a standalone
// server). Any other failure (network, authentication, a deadline, a server that is not
// primary) is no answer about the feature: the probe fails.
var refusalCodes = map[int32]bool{2: true, 9: true, 14: true, 20: true, 59: true, 72: true,
	115: true, 168: true, 238: true, codeAPIStrictError: true, 17276: true, 40324: true, 40573: true}

// IsRefusal reports whether err, from a command sent with ctx, is the server refusing a
// command it does not serve as written: an error reply of refusalCodes, while ctx lasts, and
// not a lost connection or a deadline.
func IsRefusal(ctx context.Context, err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && refusalCodes[ce.Code] && ctx.Err() == nil && !mongo.IsNetworkError(err) && !mongo.IsTimeout(err)
}

// matchesNothing is the filter of every probe: no document has an _id in an empty list.
var matchesNothing = bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}

// nowPipeline is the update pipeline the NowInWrites probes send.
var nowPipeline = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "probed_at", Value: "$$NOW"}}}}}

// nowInWritesCommands are the NowInWrites probes of collection coll: a findAndModify and an
// update whose pipelines name $$NOW, each matching no document and inserting none.
func nowInWritesCommands(coll string) []bson.D {
	return []bson.D{
		{{Key: "findAndModify", Value: coll}, {Key: "query", Value: matchesNothing}, {Key: "update", Value: nowPipeline}},
		{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: matchesNothing}, {Key: "u", Value: nowPipeline}},
		}}},
	}
}

// NowInReadsCommand is the NowInReads probe, and the command that reads the server's clock
// where it is served: an aggregate of one document whose field now is $$NOW.
func NowInReadsCommand() bson.D {
	return bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$documents", Value: bson.A{bson.D{}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "now", Value: "$$NOW"}}}},
	}}, {Key: "cursor", Value: bson.D{}}}
}

// expressionProjectionsCommand is the ExpressionProjections probe of collection coll: a
// find matching no document, with the projection shape aio loads with.
func expressionProjectionsCommand(coll string) bson.D {
	return bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: matchesNothing},
		{Key: "projection", Value: bson.D{{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
			"probe", bson.D{{Key: "$ifNull", Value: bson.A{"$outbox", bson.A{}}}},
		}}}}}}, {Key: "limit", Value: 1}}
}

// ProbeNowInWrites probes coll's server for server.NowInWrites. The collection must exist:
// DocumentDB parses a findAndModify of a missing collection on another path, which refuses
// $$NOW even where writes serve it.
func ProbeNowInWrites(ctx context.Context, coll *mongo.Collection) (server.Probe, error) {
	for _, cmd := range nowInWritesCommands(coll.Name()) {
		if p, err := probe(ctx, server.NowInWrites, coll.Database(), cmd, nil); err != nil || !p.Served {
			return p, err
		}
	}
	return server.Probe{Feature: server.NowInWrites, Served: true}, nil
}

// ProbeNowInReads probes db's server for server.NowInReads, and returns the server's time
// it answered with when served.
func ProbeNowInReads(ctx context.Context, db *mongo.Database) (server.Probe, error) {
	return probe(ctx, server.NowInReads, db, NowInReadsCommand(), func(reply bson.Raw) error {
		_, err := NowOf(reply)
		return err
	})
}

// NowOf reads the server's time from a reply to the NowInReads aggregate.
func NowOf(reply bson.Raw) (bson.DateTime, error) {
	docs, ok := reply.Lookup("cursor", "firstBatch").ArrayOK()
	if ok {
		if first, err := docs.IndexErr(0); err == nil {
			if doc, ok := first.DocumentOK(); ok {
				if now, ok := doc.Lookup("now").DateTimeOK(); ok {
					return bson.DateTime(now), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("answered without a date: %v", reply)
}

// ProbeExpressionProjections probes coll's server for server.ExpressionProjections.
func ProbeExpressionProjections(ctx context.Context, coll *mongo.Collection) (server.Probe, error) {
	return probe(ctx, server.ExpressionProjections, coll.Database(), expressionProjectionsCommand(coll.Name()), nil)
}

// probe runs cmd on db and says whether the server served feature f: it did when it
// answered without an error (and check, when set, accepts the reply); it refused when it
// answered with an error reply of refusalCodes, or check refused the reply. Anything else is
// the probe's error.
func probe(ctx context.Context, f server.Feature, db *mongo.Database, cmd bson.D, check func(bson.Raw) error) (server.Probe, error) {
	reply, err := db.RunCommand(ctx, cmd).Raw()
	if err == nil {
		err = writeErrorOf(reply)
	}
	if err == nil && check != nil {
		if cerr := check(reply); cerr != nil {
			return server.Probe{Feature: f, Refusal: cerr.Error()}, nil
		}
	}
	if err == nil {
		return server.Probe{Feature: f, Served: true}, nil
	}
	var refused probeRefusal
	if errors.As(err, &refused) && ctx.Err() == nil {
		return server.Probe{Feature: f, Refusal: refused.Error()}, nil
	}
	var ce mongo.CommandError
	if IsRefusal(ctx, err) && errors.As(err, &ce) {
		return server.Probe{Feature: f, Refusal: fmt.Sprintf("(%s) %s", ce.Name, ce.Message)}, nil
	}
	return server.Probe{}, fmt.Errorf("execstore: probing the server for %s: %w", f, err)
}

// probeRefusal is a write error of refusalCodes in an ok: 1 reply (an update reports what
// it refuses per statement).
type probeRefusal struct {
	code    int32
	message string
}

func (r probeRefusal) Error() string { return fmt.Sprintf("(code %d) %s", r.code, r.message) }

// writeErrorOf is the first write error or write-concern error of an ok: 1 reply: a
// probeRefusal for a write error of refusalCodes, another error for any other.
func writeErrorOf(reply bson.Raw) error {
	if wce, err := reply.LookupErr("writeConcernError"); err == nil {
		return fmt.Errorf("write concern error: %v", wce)
	}
	errs, ok := reply.Lookup("writeErrors").ArrayOK()
	if !ok {
		return nil
	}
	first, err := errs.IndexErr(0)
	if err != nil {
		return nil
	}
	doc, _ := first.DocumentOK()
	code, _ := doc.Lookup("code").AsInt64OK()
	msg, _ := doc.Lookup("errmsg").StringValueOK()
	if refusalCodes[int32(code)] {
		return probeRefusal{code: int32(code), message: msg}
	}
	return fmt.Errorf("write error %d: %s", code, msg)
}

// Choose is the profile a store uses: forced, when it is not Detect, or else MongoDB when the
// server served every probe and FerretDB when it refused one.
func Choose(forced Profile, probes ...server.Probe) Profile {
	if forced != Detect {
		return forced
	}
	for _, p := range probes {
		if !p.Served {
			return FerretDB
		}
	}
	return MongoDB
}
