package embedded_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// These tests reset the connection of a client whose slow write is inside FerretDB, while
// other clients make acknowledged increments through the front. FerretDB does not stop a
// command whose client went away, so the front must keep the write slot until FerretDB
// has finished it: a write let in beside it would be overwritten by the older values it
// read, and acknowledged increments would be lost.

// resetProxy forwards TCP connections to target, and can reset them all.
type resetProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  [][2]net.Conn // client side, target side
	closed bool
}

// startResetProxy starts a proxy to target, closed when the test ends.
func startResetProxy(t *testing.T, target string) *resetProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &resetProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *resetProxy) addr() string { return p.ln.Addr().String() }

func (p *resetProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, [2]net.Conn{c, s})
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies src to dst; when either ends, it closes both.
func (p *resetProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// reset ends every connection the proxy holds: the target sees a TCP reset, the client
// a closed connection.
func (p *resetProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pair := range p.conns {
		_ = pair[1].(*net.TCPConn).SetLinger(0)
		pair[1].Close()
		pair[0].Close()
	}
	p.conns = nil
}

func (p *resetProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.reset()
	p.wg.Wait()
}

// resetScenario describes one test: the documents c0000…, then the end marker "end", all
// {acked: 0, slow: 0}, and a slow write that increments slow, c0000 first and "end" last.
type resetScenario struct {
	counters int
	// slowWrite runs the slow write on coll, a collection of a client that reaches the
	// front through the proxy.
	slowWrite func(ctx context.Context, coll *mongo.Collection) error
	// slowInc is what the slow write adds to each counter's slow field.
	slowInc int
}

const (
	// resetWriters and resetIncs: resetWriters clients make resetIncs acknowledged
	// increments each, spread over resetTargets counters.
	resetWriters = 4
	resetIncs    = 10
	resetTargets = 5
)

// run sends the slow write through a proxy, waits until FerretDB is running it, resets the
// proxy's connections while writers increment acked on the counters the slow write
// reaches last, and checks, once the slow write has ended, that every acknowledged
// increment is there and no counter ever went down.
func (sc resetScenario) run(t *testing.T) {
	srv.RequireEmbedded(t, "these tests reset connections to the embedded server's front")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	front, err := url.Parse(srv.URI)
	require.NoError(t, err)
	proxy := startResetProxy(t, front.Host)
	direct := connect(t, srv.URI, resetWriters+1)
	coll := collection(t, direct)
	proxied := connect(t, "mongodb://"+proxy.addr()+"/?directConnection=true&retryWrites=false", 1)
	slowColl := proxied.Database(coll.Database().Name()).Collection(coll.Name())

	docs := make([]any, 0, sc.counters+1)
	for i := range sc.counters {
		docs = append(docs, bson.D{{Key: "_id", Value: counterID(i)}, {Key: "acked", Value: 0}, {Key: "slow", Value: 0}})
	}
	docs = append(docs, bson.D{{Key: "_id", Value: "end"}, {Key: "acked", Value: 0}, {Key: "slow", Value: 0}})
	_, err = coll.InsertMany(ctx, docs)
	require.NoError(t, err)
	// The slow write reaches these last, so an increment let in beside it is overwritten.
	targets := make([]string, resetTargets)
	for i := range targets {
		targets[i] = counterID(sc.counters - resetTargets + i)
	}

	slowDone := make(chan error, 1)
	go func() { slowDone <- sc.slowWrite(ctx, slowColl) }()
	waitForSlow(ctx, t, coll, counterID(0), "the slow write to start in the server")

	// A reader checks that no target ever goes down.
	readerStop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() { readerDone <- neverDown(ctx, coll, targets, readerStop) }()

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked = make(map[string]int)
		errs  = make(chan error, resetWriters)
	)
	for w := range resetWriters {
		wg.Go(func() {
			for i := range resetIncs {
				id := targets[(w+i)%len(targets)]
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "acked", Value: 1}}}})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[id]++
				mu.Unlock()
			}
		})
	}
	proxy.reset() // while the slow write runs in FerretDB
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("slow write's client after the reset: %v", <-slowDone)

	waitForSlow(ctx, t, coll, "end", "the slow write to end in the server")
	close(readerStop)
	require.NoError(t, <-readerDone)

	cur, err := coll.Find(ctx, bson.D{})
	require.NoError(t, err)
	var got []struct {
		ID    string `bson:"_id"`
		Acked int    `bson:"acked"`
		Slow  int    `bson:"slow"`
	}
	require.NoError(t, cur.All(ctx, &got))
	require.Len(t, got, sc.counters+1)
	for _, d := range got {
		if d.ID == "end" {
			continue
		}
		assert.Equal(t, acked[d.ID], d.Acked, "%s: acknowledged increments lost", d.ID)
		// FerretDB runs a write to its end although its client went away.
		assert.Equal(t, sc.slowInc, d.Slow, "%s: the slow write's increments", d.ID)
	}
}

func counterID(i int) string { return fmt.Sprintf("c%04d", i) }

// waitForSlow waits until document id shows the slow write's first increment.
func waitForSlow(ctx context.Context, t *testing.T, coll *mongo.Collection, id, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d struct {
			Slow int `bson:"slow"`
		}
		require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d))
		if d.Slow > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// neverDown reads the targets' acked counters until stop is closed, and reports an error if
// one is ever read lower than before.
func neverDown(ctx context.Context, coll *mongo.Collection, targets []string, stop <-chan struct{}) error {
	last := make(map[string]int)
	for {
		for _, id := range targets {
			var d struct {
				Acked int `bson:"acked"`
			}
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
				return err
			}
			if d.Acked < last[id] {
				return fmt.Errorf("%s went down from %d to %d", id, last[id], d.Acked)
			}
			last[id] = d.Acked
		}
		select {
		case <-stop:
			return nil
		case <-time.After(time.Millisecond):
		}
	}
}

// A single updateMany over every document.
func TestFrontResetDuringWrite(t *testing.T) {
	resetScenario{
		counters: 400,
		slowWrite: func(ctx context.Context, coll *mongo.Collection) error {
			_, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "slow", Value: 1}}}})
			return err
		},
		slowInc: 1,
	}.run(t)
}

// An unordered bulk write of 60 updates (FerretDB never answers 100 or more): 59 that
// increment every counter, then one that marks the end.
func TestFrontResetDuringBulkWrite(t *testing.T) {
	const passes = 59
	resetScenario{
		counters: 20,
		slowWrite: func(ctx context.Context, coll *mongo.Collection) error {
			models := make([]mongo.WriteModel, 0, passes+1)
			for range passes {
				models = append(models, mongo.NewUpdateManyModel().
					SetFilter(bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: "end"}}}}).
					SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "slow", Value: 1}}}}))
			}
			models = append(models, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: "end"}}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "slow", Value: 1}}}}))
			_, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
			return err
		},
		slowInc: passes,
	}.run(t)
}

// The updateMany of TestFrontResetDuringWrite sent unacknowledged (w:0, OP_MSG moreToCome):
// the client reads no answer, and its connection is reset while FerretDB runs it.
func TestFrontResetDuringUnacknowledgedWrite(t *testing.T) {
	resetScenario{
		counters: 400,
		slowWrite: func(ctx context.Context, coll *mongo.Collection) error {
			w0 := coll.Database().Collection(coll.Name(),
				options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
			_, err := w0.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "slow", Value: 1}}}})
			return err
		},
		slowInc: 1,
	}.run(t)
}
