package embedded_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/internal/testserver"
)

// srv is the server the tests run against: the embedded server in a child process (built
// without -race), or MONGODB_URI.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

const (
	// rounds is how many compare-and-set races a test runs.
	rounds = 20
	// racers is how many goroutines race in each round.
	racers = 20
)

// testTimeout bounds each test's server work.
const testTimeout = 2 * time.Minute

// connect returns a client of uri with at most maxPool connections, disconnected when the
// test ends.
func connect(t *testing.T, uri string, maxPool uint64) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMaxPoolSize(maxPool))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, client.Disconnect(ctx))
	})
	return client
}

// collection returns a collection of its own for the test, dropped when the test ends.
func collection(t *testing.T, client *mongo.Client) *mongo.Collection {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	coll := client.Database("embedded_test").Collection(name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, coll.Drop(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, coll.Drop(ctx))
	})
	return coll
}

// casRound is the outcome of one compare-and-set race.
type casRound struct {
	winners int // callers told MatchedCount == 1
	logLen  int // pushes the document kept
}

// raceCAS runs rounds races: each inserts {_id, version: 1}, then racers goroutines sharing
// one client race updateOne({_id, version: 1}, {$set: {version: 2}, $push: {log: i}}).
// On MongoDB exactly one of them matches, and the document keeps its one push.
func raceCAS(ctx context.Context, t *testing.T, coll *mongo.Collection) []casRound {
	t.Helper()
	out := make([]casRound, rounds)
	for r := range rounds {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: r}, {Key: "version", Value: 1}})
		require.NoError(t, err)

		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			matched = make([]int64, racers)
			errs    = make([]error, racers)
		)
		for i := range racers {
			wg.Go(func() {
				<-start
				res, err := coll.UpdateOne(ctx,
					bson.D{{Key: "_id", Value: r}, {Key: "version", Value: 1}},
					bson.D{
						{Key: "$set", Value: bson.D{{Key: "version", Value: 2}}},
						{Key: "$push", Value: bson.D{{Key: "log", Value: i}}},
					})
				if err != nil {
					errs[i] = err
					return
				}
				matched[i] = res.MatchedCount
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d racer %d", r, i)
		}
		for _, m := range matched {
			out[r].winners += int(m)
		}

		var got struct {
			Version int   `bson:"version"`
			Log     []int `bson:"log"`
		}
		require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: r}}).Decode(&got))
		require.Equal(t, 2, got.Version, "round %d", r)
		out[r].logLen = len(got.Log)
	}
	return out
}

func TestFrontCASHasOneWinner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, racers))

	for r, round := range raceCAS(ctx, t, coll) {
		assert.Equal(t, casRound{winners: 1, logLen: 1}, round, "round %d", r)
	}
}

func TestFrontIncLosesNothing(t *testing.T) {
	const writers, perWriter = 16, 25
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.URI, racers))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "counter"}, {Key: "n", Value: 0}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range perWriter {
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "counter"}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var got struct {
		N int `bson:"n"`
	}
	require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "counter"}}).Decode(&got))
	assert.Equal(t, writers*perWriter, got.N)
}

// TestBareCASIsNotAtomic shows what the front is for: the same race straight against
// FerretDB goes wrong.
func TestBareCASIsNotAtomic(t *testing.T) {
	srv.RequireEmbedded(t, "there is no FerretDB without the front to race against")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	coll := collection(t, connect(t, srv.BareURI, racers))

	results := raceCAS(ctx, t, coll)
	bad := 0
	for _, round := range results {
		if round.winners != 1 || round.logLen != round.winners {
			bad++
		}
	}
	t.Logf("FerretDB without the front: %d of %d rounds went wrong: %+v", bad, rounds, results)
	assert.Positive(t, bad, "every round had one winner without the front: the race did not race")
}

// TestUnacknowledgedWrites checks that writes sent with w:0 (OP_MSG moreToCome) leave the
// connection usable: FerretDB answers them although the client reads no answer, and the
// front drops those answers.
func TestUnacknowledgedWrites(t *testing.T) {
	srv.RequireEmbedded(t, "the test checks the embedded front's dropping of FerretDB's answers to moreToCome writes")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// One connection: the reads that follow the writes use the connection they were sent on.
	coll := collection(t, connect(t, srv.URI, 1))
	w0 := coll.Database().Collection(coll.Name(),
		options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))

	for i := range 10 {
		_, err := w0.InsertOne(ctx, bson.D{{Key: "_id", Value: i}})
		require.NoError(t, err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
}

// TestStartClose runs the server in this process: start, use, close, nothing left behind.
func TestStartClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("temporary directory", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		s, err := embedded.Start(ctx, embedded.Options{})
		require.NoError(t, err)
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "Start made its data directory in TMPDIR")
		require.NoError(t, s.Close())
		entries, err = os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, entries, "Close removed it")
	})

	dir := filepath.Join(t.TempDir(), "data")

	s, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s.URI(), "mongodb://127.0.0.1:"), s.URI())
	assert.True(t, strings.HasPrefix(s.BareURI(), "mongodb://127.0.0.1:"), s.BareURI())
	assert.NotEqual(t, s.URI(), s.BareURI())

	client, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	require.NoError(t, err)
	require.NoError(t, client.Ping(ctx, nil))
	coll := client.Database("embedded_test").Collection("start_close")
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	require.NoError(t, err)
	n, err := coll.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	require.NoError(t, client.Disconnect(ctx))

	require.NoError(t, s.Close())
	assert.NoError(t, s.Close(), "a second Close returns the first's result")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err, "a given directory is kept")
	assert.NotEmpty(t, entries, "FerretDB's SQLite files are in the given directory")
}

// A data directory serves one embedded server at a time: Start on a directory another serves
// returns ErrDirInUse, naming its holder, and leaves the first alone; once it closed, the
// directory is free.
func TestDirInUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	first, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err)

	_, err = embedded.Start(ctx, embedded.Options{Dir: dir})
	require.ErrorIs(t, err, embedded.ErrDirInUse)
	assert.ErrorContains(t, err, dir)
	assert.ErrorContains(t, err, "held by this process")

	client, err := mongo.Connect(options.Client().ApplyURI(first.URI()))
	require.NoError(t, err)
	assert.NoError(t, client.Ping(ctx, nil), "the first server still serves")
	require.NoError(t, client.Disconnect(ctx))
	require.NoError(t, first.Close())

	again, err := embedded.Start(ctx, embedded.Options{Dir: dir})
	require.NoError(t, err, "the directory is free once its server closed")
	require.NoError(t, again.Close())
}
