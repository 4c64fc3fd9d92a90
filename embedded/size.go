package embedded

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// This file keeps documents within MongoDB's size limit, which FerretDB 1.24.2 reports in
// hello (maxBsonObjectSize) but does not enforce: it stores a document of any size.
//
// The front asks sizeGuard about every write while it holds the write slot of the request's
// database, so no other write to that database runs between the question and the write.
// For an insert, update or findAndModify the guard answers in one of two ways:
//
//   - the request may go to FerretDB as sent, because no document it writes can end past
//     the limit. That is the usual answer. For an update that names its documents by _id
//     it usually costs no read: the guard keeps an upper bound of their sizes (sizeBounds,
//     bounds.go);
//   - the request must not go as sent. The guard has then run the request's statements
//     itself, one at a time, refusing each that would take a document past the limit as
//     MongoDB does (same code, same message, same index), and returns the reply the client
//     gets instead of FerretDB's.
//
// Every other write only makes the guard forget bounds it may make wrong.
//
// An insert is judged by the size of its documents. An update or a findAndModify whose
// filter names its documents by _id (strings or ObjectIDs) is judged first by their kept
// bounds: each statement takes a bound to what it can make of it (statement.boundAfter).
// A document without a kept bound, or whose bound would pass the limit, is read by _id and
// its exact size used instead. When the bounds stay within the limit, the request goes as
// sent and the bounds it leaves are kept. Otherwise, and for a statement that names no _id,
// the statement is judged by a bound from a read: the largest document it may change, read
// from FerretDB, plus the most its update can add (growthBound). When that bound is past
// the limit, the statement is tried on a copy: the documents it may change are copied into
// scratchCollection of the same database, the statement runs there, and the copies are
// measured. FerretDB applies the statement to the copies as it would to the originals (same
// filter, same order, same update code), so the try says what the write would make. The
// copy is dropped after.

// maxDocumentSize is MongoDB's limit on one BSON document, maxBsonObjectSize.
const maxDocumentSize = 16 * 1024 * 1024

// The codes MongoDB refuses a write past maxDocumentSize with.
const (
	// codeBadValue refuses an inserted document past the limit.
	codeBadValue = 2
	// codeUpdateTooLarge refuses an update whose resulting document is past the limit.
	codeUpdateTooLarge = 17419
	// codeUpsertTooLarge refuses an upsert whose inserted document is past the limit.
	codeUpsertTooLarge = 17420
)

// scratchCollection is the collection, in the written database, in which the guard tries a
// statement on copies of the documents it may change. It exists only while the guard holds
// the database's write slot.
const scratchCollection = "embedded.size_check"

// statementSlack is added to each statement's growthBound: room for an _id FerretDB adds
// (an ObjectID element, 17 bytes) and for the headers of a new document.
const statementSlack = 1 << 10

// growthFactor bounds how many bytes an update operator's element (key and value, as the
// update document encodes them) can add to a document, per byte of the element. A path
// component of c bytes costs c+1 in the key and at most c+7 (type, name, NUL, length,
// terminator) as a new embedded document; a value costs the same in both, except that
// $currentDate makes an 8-byte date of a 1-byte boolean, $inc or $mul may widen an int32 to
// 8 bytes, and $push or $addToSet store a value under an array index of up to 8 digits where
// the update has a key of at least one byte. Each is at most four times the bytes the update
// spends on it. A path component that is a number may also make FerretDB fill an array up to
// that index with nulls, which pathPadding bounds; paths that name array elements by position
// ($, $[], $[id]) have no bound.
const growthFactor = 4

// errUnbounded reports a statement whose growth has no bound: it is tried on a copy.
var errUnbounded = errors.New("update growth has no bound")

// updateOperators are the update operators growthBound knows.
var updateOperators = map[string]bool{
	"$set": true, "$setOnInsert": true, "$unset": true, "$inc": true, "$mul": true,
	"$min": true, "$max": true, "$currentDate": true, "$rename": true, "$bit": true,
	"$push": true, "$addToSet": true, "$pop": true, "$pull": true, "$pullAll": true,
}

// removingOperators are the update operators that only take away: FerretDB removes the
// field or the array elements they name, and does nothing when the path is missing.
var removingOperators = map[string]bool{"$unset": true, "$pop": true, "$pull": true, "$pullAll": true}

// unchangingCommands are the write commands (lower-cased) that change no document: they
// leave every kept bound true.
var unchangingCommands = map[string]bool{
	"create": true, "createindexes": true, "dropindexes": true, "collmod": true, "compact": true,
	"reindex": true, "createuser": true, "updateuser": true, "dropuser": true,
	"dropallusersfromdatabase": true, "logout": true, "killsessions": true, "killallsessions": true,
	"refreshsessions": true, "setfreemonitoring": true,
}

// sizeGuard refuses writes past maxDocumentSize. It reads and tries writes through its own
// connections to FerretDB, without the front: the front calls it only while it holds the
// slot of the database the guard works on.
type sizeGuard struct {
	client *mongo.Client
	bounds *sizeBounds
}

// newSizeGuard returns a guard that reaches FerretDB at uri (its bare URI). It connects
// lazily.
func newSizeGuard(uri string) (*sizeGuard, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetRetryReads(false).SetRetryWrites(false))
	if err != nil {
		return nil, err
	}
	return &sizeGuard{client: client, bounds: newSizeBounds()}, nil
}

// close closes the guard's connections.
func (g *sizeGuard) close(ctx context.Context) error { return g.client.Disconnect(ctx) }

// answer implements writeCheck.
func (g *sizeGuard) answer(ctx context.Context, req request, msg []byte) (verdict, error) {
	kind := strings.ToLower(req.command)
	if req.opCode != wiremessage.OpMsg {
		return g.unattributed(), nil
	}
	switch kind {
	case "insert", "update", "findandmodify", "delete", "drop":
	case "dropdatabase":
		g.bounds.forgetDatabase(req.database)
		return verdict{}, nil
	default:
		if unchangingCommands[kind] {
			return verdict{}, nil
		}
		return g.unattributed(), nil
	}
	cmd, err := readWriteCommand(msg[headerLen:], req)
	if err != nil {
		// FerretDB answers a command it cannot parse; the guard has nothing to add, and
		// forgets what the command might change.
		g.bounds.forgetDatabase(req.database)
		return verdict{}, nil
	}
	var v verdict
	switch kind {
	case "insert":
		v, err = g.insert(ctx, cmd)
	case "update":
		v, err = g.update(ctx, cmd)
	case "findandmodify":
		v, err = g.findAndModify(ctx, cmd)
	case "delete":
		g.deleted(cmd)
	default:
		g.bounds.forgetCollection(cmd.namespace())
	}
	if err != nil {
		g.bounds.forgetCollection(cmd.namespace())
	}
	return v, err
}

// unattributed forgets every bound, before a write the guard cannot attribute to
// documents runs and again once it has run: it may change documents of any database.
func (g *sizeGuard) unattributed() verdict {
	g.bounds.forgetAll()
	return verdict{settle: func(bsoncore.Document) { g.bounds.forgetAll() }}
}

// deleted forgets the bounds of the documents a delete command names by _id. A delete
// makes no document larger; the bounds go only to keep the memory small.
func (g *sizeGuard) deleted(cmd writeCommand) {
	stmts, err := cmd.list("deletes")
	if err != nil {
		return
	}
	for _, doc := range stmts {
		if q, ok := doc.Lookup("q").DocumentOK(); ok {
			st := statement{filter: q}
			if keys, ok := st.boundKeys(); ok {
				g.bounds.forget(cmd.namespace(), keys)
			}
		}
	}
}

// insert answers an insert command: it goes as sent when no document is past the limit,
// and the sizes of the documents FerretDB then reports inserted become their bounds.
func (g *sizeGuard) insert(ctx context.Context, cmd writeCommand) (verdict, error) {
	docs, err := cmd.list("documents")
	if err != nil {
		return verdict{}, nil
	}
	if !slices.ContainsFunc(docs, tooLarge) {
		return g.learnInserts(cmd.namespace(), docs), nil
	}
	var keys []string
	for _, doc := range docs {
		if key, ok := boundKey(doc.Lookup("_id")); ok {
			keys = append(keys, key)
		}
	}
	g.bounds.forget(cmd.namespace(), keys)
	r := bulkReply{}
	for i, doc := range docs {
		if tooLarge(doc) {
			r.refuse(i, codeBadValue, fmt.Sprintf("object to insert too large. size in bytes: %d, max size: %d",
				len(doc), maxDocumentSize))
		} else if err := g.runStatement(ctx, cmd, "documents", doc, i, &r); err != nil {
			return verdict{}, err
		}
		if cmd.ordered() && r.failed() {
			break
		}
	}
	return verdict{reply: r.document()}, nil
}

// learnInserts returns the verdict that forwards an insert of docs into ns and, once
// FerretDB has answered, sets the bounds of the documents it surely inserted to their sizes
// and forgets those of the others.
func (g *sizeGuard) learnInserts(ns namespace, docs []bsoncore.Document) verdict {
	type inserted struct {
		key  string
		size int
	}
	// docs are in the message, whose buffer the front reuses: keep what is needed.
	var sizes []inserted
	for _, doc := range docs {
		if key, ok := boundKey(doc.Lookup("_id")); ok {
			sizes = append(sizes, inserted{key: key, size: len(doc)})
		} else {
			// FerretDB gives a document without _id a new ObjectID, which the guard does
			// not learn; another _id type is not kept.
			sizes = append(sizes, inserted{size: -1})
		}
	}
	epoch := g.bounds.currentEpoch()
	return verdict{settle: func(reply bsoncore.Document) {
		done := insertsDone(reply, len(sizes))
		learned := map[string]int{}
		var unsure []string
		for i, d := range sizes {
			switch {
			case d.size < 0:
			case i < done:
				learned[d.key] = d.size
			default:
				unsure = append(unsure, d.key)
			}
		}
		for _, key := range unsure {
			delete(learned, key) // two documents with one _id: the second was not inserted
		}
		g.bounds.forget(ns, unsure)
		g.bounds.setSince(epoch, ns, learned)
	}}
}

// insertsDone returns how many of the n documents of an insert, from the first, FerretDB's
// reply says it inserted: those before its first write error. It is 0 for a failed
// command, or no reply.
func insertsDone(reply bsoncore.Document, n int) int {
	if !commandOK(reply) {
		return 0
	}
	inserted, ok := reply.Lookup("n").AsInt64OK()
	if !ok {
		return 0
	}
	done := min(n, int(inserted))
	if arr, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		values, err := arr.Values()
		if err != nil {
			return 0
		}
		for _, v := range values {
			we, ok := v.DocumentOK()
			if !ok {
				return 0
			}
			index, ok := we.Lookup("index").AsInt64OK()
			if !ok {
				return 0
			}
			done = min(done, int(index))
		}
	}
	return max(done, 0)
}

// commandOK reports whether reply is a command reply with ok: 1.
func commandOK(reply bsoncore.Document) bool {
	if reply == nil {
		return false
	}
	ok, isNumber := reply.Lookup("ok").AsFloat64OK()
	return isNumber && ok == 1
}

// update answers an update command: it goes as sent when no statement can take a document
// past the limit, or when its one statement was tried and does not.
func (g *sizeGuard) update(ctx context.Context, cmd writeCommand) (verdict, error) {
	raw, err := cmd.list("updates")
	if err != nil {
		return verdict{}, nil
	}
	stmts := make([]statement, len(raw))
	for i, doc := range raw {
		if stmts[i], err = updateStatement(doc); err != nil {
			return verdict{}, nil
		}
	}
	coll := g.client.Database(cmd.database).Collection(cmd.collection)
	v, judged, err := g.forwardByBounds(ctx, coll, cmd.namespace(), stmts)
	if err != nil || judged == boundsFit {
		return v, err
	}
	g.forgetTouched(cmd.namespace(), stmts)
	if judged != boundsPast {
		fits, err := g.fits(ctx, coll, stmts)
		if err != nil || fits {
			return verdict{}, err
		}
	}
	r := bulkReply{update: true}
	if len(stmts) == 1 {
		code, err := g.try(ctx, coll, stmts[0])
		if err != nil || code == 0 {
			return verdict{}, err
		}
		r.refuse(0, code, refusalMessage(code))
		return verdict{reply: r.document()}, nil
	}
	// Each statement is judged on the documents as the ones before it left them, so they
	// run one at a time.
	for i, st := range stmts {
		code, err := g.refusal(ctx, coll, st)
		if err != nil {
			return verdict{}, err
		}
		if code != 0 {
			r.refuse(i, code, refusalMessage(code))
		} else if err := g.runStatement(ctx, cmd, "updates", raw[i], i, &r); err != nil {
			return verdict{}, err
		}
		if cmd.ordered() && r.failed() {
			break
		}
	}
	return verdict{reply: r.document()}, nil
}

// findAndModify answers a findAndModify command: it goes as sent unless its update would
// take the document past the limit, and then gets MongoDB's command error.
func (g *sizeGuard) findAndModify(ctx context.Context, cmd writeCommand) (verdict, error) {
	st, err := findAndModifyStatement(cmd.body)
	if err != nil {
		return verdict{}, nil // FerretDB refuses it
	}
	if st.update.Type == 0 {
		// A remove (or a command FerretDB refuses): it makes no document larger.
		if keys, ok := st.boundKeys(); ok {
			g.bounds.forget(cmd.namespace(), keys)
		}
		return verdict{}, nil
	}
	coll := g.client.Database(cmd.database).Collection(cmd.collection)
	v, judged, err := g.forwardByBounds(ctx, coll, cmd.namespace(), []statement{st})
	if err != nil || judged == boundsFit {
		return v, err
	}
	g.forgetTouched(cmd.namespace(), []statement{st})
	var code int
	if judged == boundsPast {
		code, err = g.try(ctx, coll, st)
	} else {
		code, err = g.refusal(ctx, coll, st)
	}
	if err != nil || code == 0 {
		return verdict{}, err
	}
	return verdict{reply: bsoncore.NewDocumentBuilder().
		AppendDouble("ok", 0).
		AppendString("errmsg", refusalMessage(code)).
		AppendInt32("code", int32(code)).
		AppendString("codeName", "Location"+strconv.Itoa(code)).
		Build()}, nil
}

// boundsJudgement is what forwardByBounds tells of statements.
type boundsJudgement int

const (
	// boundsUnknown: the statements cannot be judged by bounds (one names no _id whose
	// bound is kept, or has no growth bound, or FerretDB refuses the read).
	boundsUnknown boundsJudgement = iota
	// boundsFit: every document the statements name stays within the limit; they are
	// forwarded, and the bounds they leave are kept.
	boundsFit
	// boundsPast: a document's exact size, plus what the statements can add to it, passes
	// the limit. The statements go straight to the try, which is exact.
	boundsPast
)

// forwardByBounds judges stmts, run one after the other on the collection ns, by the bounds
// of the documents they name, and returns the verdict that forwards them when they fit. A
// document without a kept bound, or whose bound would pass the limit, is read by _id for
// its exact size. Unless they fit, it keeps nothing.
func (g *sizeGuard) forwardByBounds(ctx context.Context, coll *mongo.Collection, ns namespace, stmts []statement) (verdict, boundsJudgement, error) {
	keys := make([][]string, len(stmts))
	ids := map[string]bsoncore.Value{}
	for i, st := range stmts {
		if _, err := st.growthBound(); err != nil {
			return verdict{}, boundsUnknown, nil
		}
		values, ok := st.filterIDs()
		if !ok || len(values) == 0 {
			return verdict{}, boundsUnknown, nil
		}
		for _, id := range values {
			key, ok := boundKey(id)
			if !ok {
				return verdict{}, boundsUnknown, nil
			}
			if !slices.Contains(keys[i], key) {
				keys[i] = append(keys[i], key)
			}
			ids[key] = id
		}
	}

	before := make(map[string]int, len(ids))
	exact := map[string]bool{}
	for key := range ids {
		if n, ok := g.bounds.get(ns, key); ok {
			before[key] = n
		}
	}
	for {
		for key, id := range ids {
			if _, ok := before[key]; ok {
				continue
			}
			n, err := documentSize(ctx, coll, id)
			if se := mongo.ServerError(nil); errors.As(err, &se) {
				return verdict{}, boundsUnknown, nil // FerretDB cannot read it
			}
			if err != nil {
				return verdict{}, boundsUnknown, err
			}
			before[key], exact[key] = n, true
		}
		after, err := boundsAfter(stmts, keys, ids, before)
		if err != nil {
			return verdict{}, boundsUnknown, nil
		}
		var loose []string // bounds past the limit that an exact size may bring back
		for key, n := range after {
			if n <= maxDocumentSize {
				continue
			}
			if exact[key] {
				return verdict{}, boundsPast, nil
			}
			loose = append(loose, key)
		}
		if len(loose) == 0 {
			g.bounds.set(ns, after)
			return verdict{settle: g.forgetOnFailure(ns, keysOf(after))}, boundsFit, nil
		}
		for _, key := range loose {
			delete(before, key)
		}
	}
}

// boundsAfter returns the bounds of the documents stmts name (keys[i] are the keys of the
// _ids statement i names, ids their values) once the statements have run one after the
// other, from their bounds before.
func boundsAfter(stmts []statement, keys [][]string, ids map[string]bsoncore.Value, before map[string]int) (map[string]int, error) {
	after := maps.Clone(before)
	for i, st := range stmts {
		for _, key := range keys[i] {
			n, err := st.boundAfter(after[key], ids[key])
			if err != nil {
				return nil, err
			}
			after[key] = n
		}
	}
	return after, nil
}

// forgetOnFailure returns the settle function of a forwarded update: when the command
// failed, or its outcome is unknown, it forgets the bounds of keys in ns. (They hold in
// any case: forgetting is the safe side.)
func (g *sizeGuard) forgetOnFailure(ns namespace, keys []string) func(bsoncore.Document) {
	return func(reply bsoncore.Document) {
		if !commandOK(reply) || hasElements(bson.Raw(reply).Lookup("writeErrors")) {
			g.bounds.forget(ns, keys)
		}
	}
}

// forgetTouched forgets the bounds of every document stmts may change on ns: those of the
// _ids they name, or the collection's when one names none.
func (g *sizeGuard) forgetTouched(ns namespace, stmts []statement) {
	for _, st := range stmts {
		keys, ok := st.boundKeys()
		if !ok {
			g.bounds.forgetCollection(ns)
			return
		}
		g.bounds.forget(ns, keys)
	}
}

// documentSize returns the size of the document of coll with _id id, or 0 when there is
// none. FerretDB serves the read from its primary key for a string or ObjectID _id.
func documentSize(ctx context.Context, coll *mongo.Collection, id bsoncore.Value) (int, error) {
	raw, err := coll.FindOne(ctx, bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build()).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return len(raw), err
}

// refusal returns the code MongoDB would refuse st with on coll as it is now, or 0.
func (g *sizeGuard) refusal(ctx context.Context, coll *mongo.Collection, st statement) (int, error) {
	fits, err := g.fits(ctx, coll, []statement{st})
	if err != nil || fits {
		return 0, err
	}
	return g.try(ctx, coll, st)
}

// fits reports whether stmts, run one after the other on coll, surely leave every document
// they change or insert within the limit: the largest document any of them may change,
// plus the most all of them can add, is within it.
func (g *sizeGuard) fits(ctx context.Context, coll *mongo.Collection, stmts []statement) (bool, error) {
	growth := 0
	for _, st := range stmts {
		n, err := st.growthBound()
		if err != nil {
			return false, nil
		}
		growth += n
	}
	if growth > maxDocumentSize {
		return false, nil
	}
	largest := 0
	for _, st := range stmts {
		n, err := largestMatch(ctx, coll, st)
		if se := mongo.ServerError(nil); errors.As(err, &se) {
			// FerretDB cannot read what the filter matches, so it cannot update it either: it
			// refuses the statement, which writes nothing.
			continue
		}
		if err != nil {
			return false, err
		}
		largest = max(largest, n)
	}
	return largest+growth <= maxDocumentSize, nil
}

// largestMatch returns the size of the largest document of coll that st may change (0 for
// none). A filter on one _id, or on a list of them ($in), is read by _id alone, which
// FerretDB serves from its primary key; the documents read are then a superset of those
// the filter matches.
func largestMatch(ctx context.Context, coll *mongo.Collection, st statement) (int, error) {
	largest := 0
	measure := func(filter bson.Raw) error {
		cur, err := coll.Find(ctx, filter)
		if err != nil {
			return err
		}
		defer cur.Close(ctx)
		for cur.Next(ctx) {
			largest = max(largest, len(cur.Current))
		}
		return cur.Err()
	}
	ids, ok := st.filterIDs()
	if !ok {
		return largest, measure(bson.Raw(st.filter))
	}
	for _, id := range ids {
		if err := measure(bson.Raw(bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build())); err != nil {
			return 0, err
		}
	}
	return largest, nil
}

// try runs st on copies of the documents of coll it may change, in scratchCollection, and
// returns the code MongoDB would refuse st with, or 0 when every copy it changed or
// inserted is within the limit, or when FerretDB refuses st (it will refuse the original
// too).
func (g *sizeGuard) try(ctx context.Context, coll *mongo.Collection, st statement) (code int, err error) {
	scratch := coll.Database().Collection(scratchCollection)
	// The guard writes the copies without the front.
	g.bounds.forgetCollection(namespace{coll.Database().Name(), scratchCollection})
	if err := scratch.Drop(ctx); err != nil {
		return 0, err
	}
	defer func() {
		// When ctx has ended (the front is closing), the copies stay until the next try.
		if dropErr := scratch.Drop(ctx); err == nil {
			err = dropErr
		}
	}()

	// All the documents the filter matches, in FerretDB's order: the copies are inserted in
	// it, so a statement that changes one document changes the copy of the one it would
	// change in coll.
	cur, err := coll.Find(ctx, bson.Raw(st.filter))
	if se := mongo.ServerError(nil); errors.As(err, &se) {
		return 0, nil // FerretDB refuses the statement's filter
	}
	if err != nil {
		return 0, err
	}
	var copies []any
	for cur.Next(ctx) {
		copies = append(copies, bson.Raw(slices.Clone(cur.Current)))
	}
	if err := errors.Join(cur.Err(), cur.Close(ctx)); err != nil {
		return 0, err
	}
	if len(copies) > 0 {
		if _, err := scratch.InsertMany(ctx, copies); err != nil {
			return 0, err
		}
	}

	reply, err := coll.Database().RunCommand(ctx, bson.Raw(st.on(scratchCollection))).Raw()
	if se := mongo.ServerError(nil); errors.As(err, &se) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if hasElements(reply.Lookup("writeErrors")) {
		return 0, nil
	}

	found, err := scratch.Find(ctx, bson.D{})
	if err != nil {
		return 0, err
	}
	defer found.Close(ctx)
	for found.Next(ctx) {
		if tooLarge(bsoncore.Document(found.Current)) {
			if upserted(reply) {
				return codeUpsertTooLarge, nil
			}
			return codeUpdateTooLarge, nil
		}
	}
	return 0, found.Err()
}

// upserted reports whether reply, to an update or a findAndModify, says a document was
// inserted.
func upserted(reply bson.Raw) bool {
	if hasElements(reply.Lookup("upserted")) {
		return true
	}
	_, err := reply.LookupErr("lastErrorObject", "upserted")
	return err == nil
}

// runStatement runs the one statement stmt of cmd (the element at index of its list field)
// as a command of its own, through the guard's connection, and adds its reply to r. A
// command error becomes the statement's write error.
func (g *sizeGuard) runStatement(ctx context.Context, cmd writeCommand, field string, stmt bsoncore.Document, index int, r *bulkReply) error {
	reply, err := g.client.Database(cmd.database).RunCommand(ctx, bson.Raw(cmd.with(field, stmt))).Raw()
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		r.refuse(index, int(ce.Code), ce.Message)
		return nil
	}
	if err != nil {
		return err
	}
	return r.add(bsoncore.Document(reply), index)
}

// hasElements reports whether v is an array with an element.
func hasElements(v bson.RawValue) bool {
	arr, ok := v.ArrayOK()
	if !ok {
		return false
	}
	values, err := arr.Values()
	return err == nil && len(values) > 0
}

func tooLarge(doc bsoncore.Document) bool { return len(doc) > maxDocumentSize }

// refusalMessage is MongoDB's message for code.
func refusalMessage(code int) string {
	if code == codeUpsertTooLarge {
		return "Document to upsert is larger than " + strconv.Itoa(maxDocumentSize)
	}
	return "Resulting document after update is larger than " + strconv.Itoa(maxDocumentSize)
}

// statement is one update: an update command's statement, or a findAndModify's.
type statement struct {
	filter bsoncore.Document
	update bsoncore.Value // a document (operators or a replacement) or a pipeline
	upsert bool
	// raw is the statement as sent: an update's statement document, or a findAndModify's
	// command without the command's own fields.
	raw           bsoncore.Document
	findAndModify bool
}

// updateStatement reads one statement of an update command: {q, u, upsert, multi, …}.
func updateStatement(doc bsoncore.Document) (statement, error) {
	st := statement{raw: doc}
	var ok bool
	if st.filter, ok = doc.Lookup("q").DocumentOK(); !ok {
		return statement{}, fmt.Errorf("%w: update statement without q", errMalformed)
	}
	st.update = doc.Lookup("u")
	st.upsert, _ = doc.Lookup("upsert").BooleanOK()
	return st, nil
}

// findAndModifyStatement reads a findAndModify command: {findAndModify, query, sort,
// update, upsert, …}. Its update is invalid for a remove.
func findAndModifyStatement(cmd bsoncore.Document) (statement, error) {
	elems, err := cmd.Elements()
	if err != nil {
		return statement{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	st := statement{findAndModify: true, filter: bsoncore.NewDocumentBuilder().Build()}
	b := bsoncore.NewDocumentBuilder()
	for i, e := range elems {
		key := e.Key()
		switch {
		case i == 0 || commandOnlyFields[key]:
			continue
		case key == "query":
			if q, ok := e.Value().DocumentOK(); ok {
				st.filter = q
			}
		case key == "update":
			st.update = e.Value()
		case key == "upsert":
			st.upsert, _ = e.Value().BooleanOK()
		}
		b.AppendValue(key, e.Value())
	}
	st.raw = b.Build()
	return st, nil
}

// on returns a command that runs st on collection: an update of st alone, or st's
// findAndModify.
func (st statement) on(collection string) bsoncore.Document {
	if st.findAndModify {
		b := bsoncore.NewDocumentBuilder().AppendString("findAndModify", collection)
		elems, _ := st.raw.Elements() // built by findAndModifyStatement
		for _, e := range elems {
			b.AppendValue(e.Key(), e.Value())
		}
		return b.Build()
	}
	return bsoncore.NewDocumentBuilder().
		AppendString("update", collection).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(st.raw).Build()).
		Build()
}

// filterIDs returns the _id values st's filter names with an equality or an $in, when it
// does: every document it matches has one of them.
func (st statement) filterIDs() ([]bsoncore.Value, bool) {
	v, err := st.filter.LookupErr("_id")
	if err != nil {
		return nil, false
	}
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		return []bsoncore.Value{v}, v.Type != bsoncore.TypeArray && v.Type != bsoncore.TypeRegex
	}
	op, err := firstKey(doc)
	if err != nil || !strings.HasPrefix(op, "$") {
		return []bsoncore.Value{v}, true // an embedded document as _id
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) != 1 {
		return nil, false
	}
	switch op {
	case "$eq":
		return []bsoncore.Value{elems[0].Value()}, true
	case "$in":
		arr, ok := elems[0].Value().ArrayOK()
		if !ok {
			return nil, false
		}
		ids, err := arr.Values()
		if err != nil {
			return nil, false
		}
		for _, id := range ids {
			if id.Type == bsoncore.TypeArray || id.Type == bsoncore.TypeRegex {
				return nil, false
			}
		}
		return ids, true
	}
	return nil, false
}

// boundKeys returns the boundKey of every _id st's filter names, and false when it names
// none. An _id whose bound is not kept is left out: no bound of its document is kept.
func (st statement) boundKeys() ([]string, bool) {
	ids, ok := st.filterIDs()
	if !ok {
		return nil, false
	}
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		if key, ok := boundKey(id); ok {
			keys = append(keys, key)
		}
	}
	return keys, true
}

// replaces reports whether st's update is a replacement document.
func (st statement) replaces() bool {
	update, ok := st.update.DocumentOK()
	if !ok {
		return false
	}
	op, err := firstKey(update)
	return err != nil || !strings.HasPrefix(op, "$")
}

// boundAfter returns a bound of the size of the document with _id id once st has run,
// when before bounds it now (0: there is none), or errUnbounded. An update adds at most
// growthBound; a replacement leaves the replacement with its _id, or the document as it
// was when st does not match it; an upsert inserts at most growthBound.
func (st statement) boundAfter(before int, id bsoncore.Value) (int, error) {
	n, err := st.growthBound()
	if err != nil {
		return 0, err
	}
	if st.replaces() {
		idElement := 1 + len("_id") + 1 + len(id.Data)
		return max(before, n+idElement), nil
	}
	return before + n, nil
}

// growthBound returns the most st can add to a document it changes, or the size of a
// document it inserts (an upsert), or errUnbounded.
func (st statement) growthBound() (int, error) {
	n := statementSlack
	if st.upsert {
		// An upsert starts from the filter's equality fields.
		b, err := pathsBound(st.filter, false)
		if err != nil {
			return 0, err
		}
		n += b
	}
	switch st.update.Type {
	case bsoncore.TypeArray:
		// An aggregation pipeline: FerretDB 1.24.2 refuses it, and writes nothing for it.
		return n, nil
	case bsoncore.TypeEmbeddedDocument:
	default:
		return n, nil // FerretDB refuses it
	}
	update := st.update.Document()
	op, err := firstKey(update)
	if err != nil || !strings.HasPrefix(op, "$") {
		// A replacement: the document becomes update, with its _id.
		return n + len(update), nil
	}
	elems, err := update.Elements()
	if err != nil {
		return 0, errUnbounded
	}
	for _, e := range elems {
		if !updateOperators[e.Key()] {
			return 0, errUnbounded
		}
		if removingOperators[e.Key()] {
			continue
		}
		fields, ok := e.Value().DocumentOK()
		if !ok {
			continue // FerretDB refuses it
		}
		b, err := pathsBound(fields, e.Key() == "$rename")
		if err != nil {
			return 0, err
		}
		n += b
	}
	return n, nil
}

// pathsBound returns growthFactor times the size of fields' elements, whose keys are
// paths, plus the nulls those paths can make FerretDB pad arrays with (pathPadding), or
// errUnbounded. When valuesArePaths, as for $rename, string values are paths too, and no
// path may name an array element.
func pathsBound(fields bsoncore.Document, valuesArePaths bool) (int, error) {
	elems, err := fields.Elements()
	if err != nil {
		return 0, errUnbounded
	}
	n := 0
	for _, e := range elems {
		padding, ok := pathPadding(e.Key())
		if !ok || (valuesArePaths && padding > 0) {
			return 0, errUnbounded
		}
		if s, isString := e.Value().StringValueOK(); valuesArePaths && isString {
			if padding, ok := pathPadding(s); !ok || padding > 0 {
				return 0, errUnbounded
			}
		}
		n += growthFactor*len(e) + padding
	}
	return n, nil
}

// pathPadding returns the most an update that writes path can add by padding arrays: for
// each component that is an array index (FerretDB reads it with strconv.Atoi), FerretDB
// fills an array with nulls up to the index, each null element taking the index's digits
// and two bytes. It reports false for a path without such a bound: an empty component, a
// positional operator ($, $[], $[id]), a negative or overlong number, or an index past the
// limit.
func pathPadding(path string) (int, bool) {
	n := 0
	for c := range strings.SplitSeq(path, ".") {
		if c == "" || strings.HasPrefix(c, "$") {
			return 0, false
		}
		index, err := strconv.Atoi(c)
		if err != nil {
			if strings.Trim(c, "+-0123456789") == "" {
				return 0, false
			}
			continue // a field name
		}
		if index < 0 || index >= maxDocumentSize {
			return 0, false
		}
		n += (index + 1) * (len(strconv.Itoa(index)) + 2)
	}
	return n, true
}

// commandOnlyFields are fields of a command that belong to the command as a whole: the
// guard leaves them out of the commands it runs for one statement, which the driver gives
// its own.
var commandOnlyFields = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "$clusterTime": true, "$readPreference": true,
	"autocommit": true, "startTransaction": true, "writeConcern": true, "maxTimeMS": true,
}

// writeCommand is a write command read from an OP_MSG.
type writeCommand struct {
	database   string
	collection string
	body       bsoncore.Document // the kind-0 section
	// sequences holds the kind-1 sections by identifier (insert's documents, update's
	// updates).
	sequences map[string][]bsoncore.Document
}

// readWriteCommand reads the OP_MSG body (the message after its header) of req.
func readWriteCommand(body []byte, req request) (writeCommand, error) {
	flags, rem, ok := wiremessage.ReadMsgFlags(body)
	if !ok {
		return writeCommand{}, fmt.Errorf("%w: OP_MSG without flagBits", errMalformed)
	}
	if flags&wiremessage.ChecksumPresent != 0 {
		rem = rem[:len(rem)-4] // classify has checked it is there
	}
	cmd := writeCommand{database: req.database, sequences: map[string][]bsoncore.Document{}}
	for len(rem) > 0 {
		var kind wiremessage.SectionType
		kind, rem, _ = wiremessage.ReadMsgSectionType(rem)
		switch kind {
		case wiremessage.SingleDocument:
			cmd.body, rem, ok = wiremessage.ReadMsgSectionSingleDocument(rem)
		case wiremessage.DocumentSequence:
			var id string
			var docs []bsoncore.Document
			id, docs, rem, ok = wiremessage.ReadMsgSectionDocumentSequence(rem)
			cmd.sequences[id] = append(cmd.sequences[id], docs...)
		default:
			ok = false
		}
		if !ok {
			return writeCommand{}, fmt.Errorf("%w: OP_MSG section", errMalformed)
		}
	}
	name, err := firstKey(cmd.body)
	if err != nil {
		return writeCommand{}, err
	}
	if cmd.collection, ok = cmd.body.Lookup(name).StringValueOK(); !ok {
		return writeCommand{}, fmt.Errorf("%w: %s without a collection", errMalformed, name)
	}
	return cmd, nil
}

// namespace returns the collection the command names.
func (c writeCommand) namespace() namespace {
	return namespace{database: c.database, collection: c.collection}
}

// list returns the documents of field: a document sequence, or an array in the body.
func (c writeCommand) list(field string) ([]bsoncore.Document, error) {
	if docs, ok := c.sequences[field]; ok {
		return docs, nil
	}
	arr, ok := c.body.Lookup(field).ArrayOK()
	if !ok {
		return nil, fmt.Errorf("%w: no %s", errMalformed, field)
	}
	values, err := arr.Values()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, field, err)
	}
	docs := make([]bsoncore.Document, len(values))
	for i, v := range values {
		if docs[i], ok = v.DocumentOK(); !ok {
			return nil, fmt.Errorf("%w: %s[%d] is not a document", errMalformed, field, i)
		}
	}
	return docs, nil
}

// ordered reports the command's ordered field (default true).
func (c writeCommand) ordered() bool {
	ordered, ok := c.body.Lookup("ordered").BooleanOK()
	return ordered || !ok
}

// with returns the command with stmt as the one element of its list field, without the
// fields that belong to the command as a whole.
func (c writeCommand) with(field string, stmt bsoncore.Document) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	elems, _ := c.body.Elements() // readWriteCommand has read the body
	for _, e := range elems {
		if key := e.Key(); key != field && !commandOnlyFields[key] {
			b.AppendValue(key, e.Value())
		}
	}
	return b.AppendArray(field, bsoncore.NewArrayBuilder().AppendDocument(stmt).Build()).Build()
}

// bulkReply is the reply to an insert or update command whose statements the guard ran one
// at a time: the sum of their replies and refusals, with indexes in the command.
type bulkReply struct {
	update      bool // the reply has nModified and upserted
	n           int32
	nModified   int32
	upserted    []bsoncore.Document
	writeErrors []bsoncore.Document
}

// refuse records the statement at index as refused with code and message.
func (r *bulkReply) refuse(index, code int, message string) {
	r.writeErrors = append(r.writeErrors, bsoncore.NewDocumentBuilder().
		AppendInt32("index", int32(index)).
		AppendInt32("code", int32(code)).
		AppendString("errmsg", message).
		Build())
}

// failed reports whether a statement failed.
func (r *bulkReply) failed() bool { return len(r.writeErrors) > 0 }

// add adds reply, the reply to the one statement at index, run alone.
func (r *bulkReply) add(reply bsoncore.Document, index int) error {
	n, _ := reply.Lookup("n").AsInt64OK()
	modified, _ := reply.Lookup("nModified").AsInt64OK()
	r.n += int32(n)
	r.nModified += int32(modified)
	for _, field := range []string{"upserted", "writeErrors"} {
		arr, ok := reply.Lookup(field).ArrayOK()
		if !ok {
			continue
		}
		values, err := arr.Values()
		if err != nil {
			return fmt.Errorf("%w: %s in FerretDB's reply: %v", errMalformed, field, err)
		}
		for _, v := range values {
			doc, ok := v.DocumentOK()
			if !ok {
				return fmt.Errorf("%w: %s in FerretDB's reply", errMalformed, field)
			}
			doc = withIndex(doc, index)
			if field == "upserted" {
				r.upserted = append(r.upserted, doc)
			} else {
				r.writeErrors = append(r.writeErrors, doc)
			}
		}
	}
	return nil
}

// withIndex returns doc with its index field set to index.
func withIndex(doc bsoncore.Document, index int) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendInt32("index", int32(index))
	elems, _ := doc.Elements() // read by Values
	for _, e := range elems {
		if e.Key() != "index" {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	return b.Build()
}

// document returns the reply as MongoDB shapes it.
func (r *bulkReply) document() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder().AppendInt32("n", r.n)
	if r.update {
		if len(r.upserted) > 0 {
			b.AppendArray("upserted", documentArray(r.upserted))
		}
		b.AppendInt32("nModified", r.nModified)
	}
	if len(r.writeErrors) > 0 {
		b.AppendArray("writeErrors", documentArray(r.writeErrors))
	}
	return b.AppendDouble("ok", 1).Build()
}

func documentArray(docs []bsoncore.Document) bsoncore.Array {
	b := bsoncore.NewArrayBuilder()
	for _, d := range docs {
		b.AppendDocument(d)
	}
	return b.Build()
}
