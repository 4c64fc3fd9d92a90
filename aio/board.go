package aio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/hedge"
	"github.com/execstore/execstore/internal/wake"
)

// The board (wake.Board) a store offers the relays of every process on its collection.
const (
	// boardSuffix names the board's database after the store's: a database of its own keeps
	// its writes from waiting behind the commits' and the leases' on a server that runs one
	// write per database at a time (the embedded server).
	boardSuffix = "_wakes"
	// boardKeep bounds the marks a holder's record keeps of each writer.
	boardKeep = 64
	// boardRefresh is how long a store goes by what it read of the holdings.
	boardRefresh = time.Second
	// boardStale is how long a holding counts without being published again (relays publish
	// theirs every few seconds); boardPurge how old a record is removed.
	boardStale = 30 * time.Second
	boardPurge = 10 * time.Minute
	// boardBatch bounds the commits one write of marks gathers. Past twice as many waiting
	// for it (the Coalescer's bound), a commit's mark is not written: its holder's poll finds
	// it.
	boardBatch = 1024
	// boardCarryBytes bounds the events (and their targets) of one commit whose outbox
	// entries a mark carries, so that their holder hands them out with no read;
	// boardCarryKeep bounds the carried commits a holder's record keeps of each writer: the
	// holder reads them all every WakeInterval, and a larger record made the embedded
	// server's hops slower (16 against 8). A mark that carries none, or whose entries the
	// record no longer keeps, owes a targeted read.
	boardCarryBytes = 1024
	boardCarryKeep  = 8
	// boardHedgeWrite is the least wait before a write of marks is sent again (hedge.Calls):
	// a second push doubles the marks it carries, which their holder skips.
	boardHedgeWrite = 100 * time.Millisecond
	// boardStreamAwait is how long a getMore of a holder's change stream waits for a change
	// (maxAwaitTimeMS): an idle stream costs the server one getMore this often.
	boardStreamAwait = time.Second
	// boardStreamRetry is how long a store goes by a server's refusal of a change stream
	// before it asks again: a server without them (a standalone server, FerretDB, DocumentDB)
	// is sent a refused aggregate about this often per store (and once by each holder that
	// asks before the first refusal came).
	boardStreamRetry = time.Minute
)

// board is the store's wake.Board: one record per holder, in the collection named as the
// executions collection of the database named after the store's with "_wakes" appended:
//
//	{_id: holder, k: kind, p: [partitions], a: look-ahead seconds, at: published (Unix seconds),
//	 g: the holder's generation (wake.Holding's Gen),
//	 w: {writer: [{s: seq, i: execution id, f: fire time, v: version, g: generation}, … the last boardKeep]},
//	 c: {writer: [{s: seq, a: committed at, o: [{q: seq, t: target, e: event}, …]}, … the last boardCarryKeep]}}
//
// c carries the outbox entries of the marks of a holder of the outbox whose commits wrote
// boardCarryBytes or less (wake.Mark's Outbox), by their marks' seq. Such a mark names the
// holder's latest generation (g) a read of the holdings answered before the commit was
// sent told the writer (wake.Mark's Gen).
//
// A relay publishes its record (Publish) and reads its marks (Marks); where the server has
// change streams, it also follows its record (Follow), and reads its marks when a change
// comes rather than at an interval. A commit that won and wrote something to relay is noted
// (note); a writer of marks gathers the notes while its previous write is in flight, reads
// the holdings when what it knows of them is older than boardRefresh, and pushes each
// holder's marks onto its record, in one bulk write.
type board struct {
	s      *Store
	coll   *mongo.Collection
	writer string // this store's name among the writers: 16 random hex digits
	out    *batch.Coalescer[boardNote]

	mu       sync.Mutex
	holders  map[wake.Kind]map[int]holding // partition → its latest holding, by kind
	gens     map[string][]genKnown         // holder → its latest generations known, oldest first
	readAt   time.Time                     // when the holdings were read; zero: read them again
	seqs     map[string]int64              // holder → the last Seq written to it
	purgedAt time.Time                     // when Publish last removed old records
	// refusedAt is when the server last refused a change stream; zero when it has not.
	refusedAt time.Time

	follows        sync.WaitGroup // the goroutines of Follow, ended by their ctx or the store's stop
	followsStopped bool           // set by stopFollows: Follow starts no more
}

// boardNote is a won commit the board may wake a holder for.
type boardNote struct {
	id     string
	part   int
	note   wakeNote
	outbox []execstore.OutboxEntry // what a mark to the outbox's holder carries; nil for none
}

// carriedDoc is one commit's outbox entries in a holder's record (c), by its mark's seq.
type carriedDoc struct {
	Seq     int64             `bson:"s"`
	At      time.Time         `bson:"a"`
	Entries []carriedEntryDoc `bson:"o"`
}

// carriedEntryDoc is one carried outbox entry.
type carriedEntryDoc struct {
	Seq    int64  `bson:"q"`
	Target string `bson:"t,omitempty"`
	Event  []byte `bson:"e"`
}

// carriedOf is what a mark's record carries of outbox.
func carriedOf(seq int64, outbox []execstore.OutboxEntry) carriedDoc {
	d := carriedDoc{Seq: seq, At: outbox[0].CommittedAt, Entries: make([]carriedEntryDoc, len(outbox))}
	for i, e := range outbox {
		d.Entries[i] = carriedEntryDoc{Seq: e.Seq, Target: e.TargetID, Event: e.Event}
	}
	return d
}

// attach sets the Outbox of the marks of one writer that carried holds, by seq.
func attach(marks []wake.Mark, carried []carriedDoc) {
	if len(carried) == 0 {
		return
	}
	bySeq := make(map[int64]carriedDoc, len(carried))
	for _, d := range carried {
		bySeq[d.Seq] = d
	}
	for i := range marks {
		d, ok := bySeq[marks[i].Seq]
		if !ok || len(d.Entries) == 0 {
			continue
		}
		out := make([]execstore.OutboxEntry, len(d.Entries))
		for j, e := range d.Entries {
			out[j] = execstore.OutboxEntry{Seq: e.Seq, SourceID: marks[i].ID, Version: marks[i].Version,
				TargetID: e.Target, Event: append([]byte{}, e.Event...), CommittedAt: d.At.UTC()}
		}
		marks[i].Outbox = out
	}
}

// holding is one holder's record, as the writers read it.
type holding struct {
	holder string
	ahead  float64 // seconds
	at     float64
}

// genKnown is a generation of a holder (wake.Holding's Gen) and when a read of the
// holdings that returned it was first answered: a commit sent after that was sent after
// the holder published it.
type genKnown struct {
	gen int64
	at  time.Time
}

// boardGensKept is how many of each holder's latest generations a store keeps: a holder
// that takes a partition draws a new one, and the commits sent before the store read it
// name the one before.
const boardGensKept = 2

// holdingDoc is a record's published part.
type holdingDoc struct {
	Holder string    `bson:"_id"`
	Kind   wake.Kind `bson:"k"`
	Parts  []int     `bson:"p"`
	Ahead  float64   `bson:"a"`
	At     float64   `bson:"at"`
	Gen    int64     `bson:"g"`
}

func newBoard(s *Store) *board {
	var id [8]byte
	_, _ = rand.Read(id[:])
	s.wakeCalls.marksWrite.Floor = boardHedgeWrite
	b := &board{s: s, writer: hex.EncodeToString(id[:]), seqs: map[string]int64{},
		coll: s.client.Database(s.opts.Database + boardSuffix).Collection(s.opts.Collection)}
	b.out = batch.NewCoalescer(batch.CoalescerConfig{MaxItems: boardBatch, MaxInFlight: 1},
		func(boardNote) int { return 1 }, b.write)
	return b
}

// close writes the notes taken, and waits for the write.
func (b *board) close() { b.out.Close() }

// unix is t in the records' seconds.
func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Publish implements wake.Board.
func (b *board) Publish(ctx context.Context, holder string, h wake.Holding) (err error) {
	if len(h.Parts) == 0 {
		return b.Withdraw(ctx, holder)
	}
	ctx = withOperation(ctx, opWake)
	defer func() { b.s.stats.record(opWake, err) }()
	now := time.Now()
	_, err = b.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: holder}},
		bson.D{{Key: "$set", Value: holdingDoc{Holder: holder, Kind: h.Kind, Parts: h.Parts, Ahead: h.Ahead, At: unix(now), Gen: h.Gen}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return err
	}
	b.mu.Lock()
	purge := now.Sub(b.purgedAt) >= boardPurge/10
	if purge {
		b.purgedAt = now
	}
	b.mu.Unlock()
	if purge { // the records of holders that stopped without withdrawing
		_, err = b.coll.DeleteMany(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: unix(now.Add(-boardPurge))}}}})
	}
	return err
}

// Marks implements wake.Board: one find of holder's record by _id, hedged (wakeCalls).
func (b *board) Marks(ctx context.Context, holder string) (map[string][]wake.Mark, error) {
	return hedge.Call(ctx, &b.s.wakeCalls.marks, func(ctx context.Context) (map[string][]wake.Mark, error) {
		var doc struct {
			W map[string][]wake.Mark  `bson:"w"`
			C map[string][]carriedDoc `bson:"c"`
		}
		err := b.coll.FindOne(withOperation(ctx, opWake), bson.D{{Key: "_id", Value: holder}},
			options.FindOne().SetProjection(bson.D{{Key: "w", Value: 1}, {Key: "c", Value: 1}})).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			err = nil
		}
		b.s.stats.record(opWake, err)
		for w, ms := range doc.W {
			attach(ms, doc.C[w])
		}
		return doc.W, err
	})
}

// Follow implements wake.Follower with a change stream on holder's record: an aggregate
// with $changeStream (followPipeline), which changes nothing. A server that refuses it (an
// error reply of connect.IsRefusal: it has no change streams, as a standalone server) is
// not asked again for boardStreamRetry; a failure (a lost connection, a deadline, a server
// that is not primary) is no answer, and the holder's next Follow asks again. Either way the
// channel closes with no receive, after the refusal is noted: a Follow that comes after a
// close for a refusal sends nothing. The stream ends with ctx, the store's stop, or a failure
// the driver does not resume from: the channel is closed first, then the server's cursor
// killed, within SettleTimeout unless the store stops. Each getMore waits up to
// boardStreamAwait, and its events carry nothing but their resume token.
func (b *board) Follow(ctx context.Context, holder string) <-chan struct{} {
	changed := make(chan struct{}, 1)
	b.mu.Lock()
	refused := !b.refusedAt.IsZero() && time.Since(b.refusedAt) < boardStreamRetry
	if refused || b.followsStopped {
		b.mu.Unlock()
		close(changed)
		return changed
	}
	b.follows.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.follows.Done()
		b.follow(ctx, holder, changed)
	}()
	return changed
}

// stopFollows waits for the streams of Follow, which the store's stop ends, and starts no
// more.
func (b *board) stopFollows() {
	b.mu.Lock()
	b.followsStopped = true
	b.mu.Unlock()
	b.follows.Wait()
}

// follow runs Follow's stream until it ends, and closes changed.
func (b *board) follow(ctx context.Context, holder string, changed chan<- struct{}) {
	streamCtx, cancel := context.WithCancel(withOperation(ctx, opWake))
	defer cancel()
	defer context.AfterFunc(b.s.stop, cancel)()
	cs, err := b.coll.Watch(streamCtx, followPipeline(holder), options.ChangeStream().SetMaxAwaitTime(boardStreamAwait))
	if err != nil {
		switch {
		case connect.IsRefusal(streamCtx, err):
			b.mu.Lock()
			b.refusedAt = time.Now()
			b.mu.Unlock()
		case streamCtx.Err() == nil: // not a stop
			b.s.stats.record(opWake, err)
		}
		close(changed) // after the refusal is noted: a Follow that comes after the close sends nothing
		return
	}
	b.s.stats.record(opWake, nil)
	changed <- struct{}{} // open: the buffer is empty
	for cs.Next(streamCtx) {
		select {
		case changed <- struct{}{}:
		default: // a receive is owed already
		}
	}
	close(changed) // the holder need not wait for the kill
	killCtx, cancelKill := context.WithTimeout(withOperation(b.s.stop, opWake), b.s.opts.SettleTimeout)
	defer cancelKill()
	_ = cs.Close(killCtx) // kills the server's cursor; a client that disconnects ends its sessions' cursors too
}

// followPipeline is the pipeline of holder's change stream: the writes to its record, each
// event cut to its resume token.
func followPipeline(holder string) mongo.Pipeline {
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{
			{Key: "documentKey._id", Value: holder},
			{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}},
		}}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}}}},
	}
}

// Withdraw implements wake.Board.
func (b *board) Withdraw(ctx context.Context, holder string) error {
	_, err := b.coll.DeleteOne(withOperation(ctx, opWake), bson.D{{Key: "_id", Value: holder}})
	b.s.stats.record(opWake, err)
	return err
}

// note takes a won commit, noted n, for the next write of marks, unless what the
// board knows of the holdings, still fresh, says no holder of another process is owed one.
// It never blocks the commit: a full intake drops the note.
func (b *board) note(n wakeNote) {
	if !n.emitted && !n.armed {
		return
	}
	id := n.id
	part := execstore.PartitionOf(id, max(b.s.env.Partitions, 1))
	b.mu.Lock()
	owed := time.Since(b.readAt) >= boardRefresh || len(b.owed(part, n, time.Now())) > 0
	b.mu.Unlock()
	if owed {
		bn := boardNote{id: id, part: part, note: n}
		if n.emitted {
			bn.outbox = n.outboxOf(boardCarryBytes)
		}
		bn.note.emits = nil // the caller's: not read after this
		b.out.TrySubmit(bn)
	}
}

// owed returns the holders of other processes a commit in part, noted n, wakes at now. The
// caller holds mu.
func (b *board) owed(part int, n wakeNote, now time.Time) []string {
	var to []string
	if h, ok := b.holders[wake.Outbox][part]; ok && n.emitted && !wake.Local(h.holder) {
		to = append(to, h.holder)
	}
	if h, ok := b.holders[wake.Timers][part]; ok && n.armed && !wake.Local(h.holder) && n.fireAt <= unix(now)+h.ahead {
		to = append(to, h.holder)
	}
	return to
}

// write is the coalescer's flush: it reads the holdings when they are stale, and pushes the
// marks of notes onto their holders' records in one bulk write. A failure only delays: the
// holders' polls find the commits.
func (b *board) write(notes []boardNote) {
	ctx, cancel := context.WithTimeout(withOperation(b.s.stop, opWake), b.s.opts.SettleTimeout)
	defer cancel()
	now := time.Now()
	b.mu.Lock()
	stale := now.Sub(b.readAt) >= boardRefresh
	b.mu.Unlock()
	if stale && !b.read(ctx, now) {
		return
	}
	marks := map[string][]wake.Mark{}
	carried := map[string][]carriedDoc{}
	var order []string
	b.mu.Lock()
	for _, n := range notes {
		for _, h := range b.owed(n.part, n.note, now) {
			if marks[h] == nil {
				order = append(order, h)
			}
			b.seqs[h]++
			m := wake.Mark{Seq: b.seqs[h], ID: n.id, Version: n.note.version}
			if b.holders[wake.Timers][n.part].holder == h {
				m.FireAt = n.note.fireAt
			}
			if o := b.holders[wake.Outbox][n.part]; len(n.outbox) > 0 && o.holder == h {
				carried[h] = append(carried[h], carriedOf(m.Seq, n.outbox))
				m.Gen = b.genBefore(h, n.note.begun)
			}
			marks[h] = append(marks[h], m)
		}
	}
	b.mu.Unlock()
	if len(order) == 0 {
		return
	}
	slices.Sort(order) // every store locks the holders' records in one order (package doc)
	models := make([]mongo.WriteModel, len(order))
	for i, h := range order {
		push := bson.D{{Key: "w." + b.writer, Value: bson.D{{Key: "$each", Value: marks[h]}, {Key: "$slice", Value: -boardKeep}}}}
		if c := carried[h]; len(c) > 0 {
			push = append(push, bson.E{Key: "c." + b.writer, Value: bson.D{{Key: "$each", Value: c}, {Key: "$slice", Value: -boardCarryKeep}}})
		}
		models[i] = mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: h}}).SetUpdate(bson.D{{Key: "$push", Value: push}})
	}
	// Hedged: a second push of the same marks, applied late, adds Seqs the holder took
	// already (wake.Cursor skips them). Each send has its own timeout: the one not taken runs
	// on after write returns.
	res, err := hedge.Call(withOperation(b.s.stop, opWake), &b.s.wakeCalls.marksWrite, func(ctx context.Context) (*mongo.BulkWriteResult, error) {
		ctx, cancel := context.WithTimeout(ctx, b.s.opts.SettleTimeout)
		defer cancel()
		res, err := b.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		b.s.stats.record(opWake, err)
		return res, err
	})
	if err != nil || res.MatchedCount < int64(len(models)) {
		b.mu.Lock()
		b.readAt = time.Time{} // a holder withdrew, or the write failed: read the holdings again
		b.mu.Unlock()
	}
}

// genBefore returns the latest generation of holder a read of the holdings answered before
// begun told, or 0. The caller holds mu.
func (b *board) genBefore(holder string, begun time.Time) int64 {
	known := b.gens[holder]
	for i := len(known) - 1; i >= 0 && !begun.IsZero(); i-- {
		if known[i].at.Before(begun) {
			return known[i].gen
		}
	}
	return 0
}

// read reads the holdings published within boardStale of now, and reports whether it did.
// Of two holders of one partition (one handing it over, one taking it), the one that
// published last is taken.
func (b *board) read(ctx context.Context, now time.Time) bool {
	cur, err := b.coll.Find(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$gte", Value: unix(now.Add(-boardStale))}}}},
		options.Find().SetProjection(bson.D{{Key: "w", Value: 0}, {Key: "c", Value: 0}}))
	if err == nil {
		var docs []holdingDoc
		if err = cur.All(ctx, &docs); err == nil {
			b.learn(docs, now, time.Now())
		}
	}
	b.s.stats.record(opWake, err)
	return err == nil
}

// learn takes what docs, read at now and answered at answered, say of the holdings, and
// the holders' generations: a generation known before keeps when it was first known.
func (b *board) learn(docs []holdingDoc, now, answered time.Time) {
	holders := map[wake.Kind]map[int]holding{wake.Outbox: {}, wake.Timers: {}}
	for _, d := range docs {
		byPart := holders[d.Kind]
		if byPart == nil {
			continue
		}
		for _, p := range d.Parts {
			if h, ok := byPart[p]; !ok || h.at < d.At {
				byPart[p] = holding{holder: d.Holder, ahead: d.Ahead, at: d.At}
			}
		}
	}
	b.mu.Lock()
	gens := make(map[string][]genKnown, len(docs))
	for _, d := range docs {
		known := b.gens[d.Holder]
		if len(known) == 0 || known[len(known)-1].gen < d.Gen {
			known = append(known, genKnown{gen: d.Gen, at: answered})
			known = known[max(len(known)-boardGensKept, 0):]
		}
		gens[d.Holder] = known
	}
	b.holders, b.gens, b.readAt = holders, gens, now
	b.mu.Unlock()
}
