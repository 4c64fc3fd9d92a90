package connect

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/server"
)

// closedPort returns an address where nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// listen serves every connection to a new listener with serve until t ends, and returns its
// address.
func listen(t *testing.T, serve func(c net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { defer c.Close(); serve(c) })
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		conns.Wait()
	})
	return l.Addr().String()
}

// silent accepts a connection and never answers, until the client hangs up.
func silent(c net.Conn) { _, _ = bufio.NewReader(c).WriteTo(discard{}) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// httpServer answers the first request of a connection as an HTTP server answers bytes it
// cannot read.
func httpServer(c net.Conn) {
	_, _ = c.Read(make([]byte, 512))
	resp := http.Response{StatusCode: http.StatusBadRequest, ProtoMajor: 1, ProtoMinor: 1, Close: true}
	_ = resp.Write(c)
}

// garbage answers with a well-framed message that no MongoDB server sends.
func garbage(c net.Conn) {
	_, _ = c.Read(make([]byte, 512))
	_, _ = c.Write([]byte{24, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0, 0, 'g', 'a', 'r', 'b', 'a', 'g', 'e', '!'})
}

// noBuild fails the test if Open gets as far as building a store.
func noBuild(t *testing.T) Builder[struct{}] {
	return func(context.Context, *mongo.Client, bool) (struct{}, error) {
		t.Error("Open reached a server that should not be reachable")
		return struct{}{}, nil
	}
}

// Open with a context without deadline gives up after ConnectTimeout, and its error names
// the address, says what answered (a reach error of package server) and wraps
// context.DeadlineExceeded. The bound leaves the driver's first check of an answering
// address time to finish on a busy machine (400 ms did not once, and the answer read as
// ErrNoAnswer); the cases run side by side.
func TestOpenGivesUpAfterConnectTimeout(t *testing.T) {
	const bound = 2 * time.Second
	for name, c := range map[string]struct {
		addr string
		want error
	}{
		"closed port":      {closedPort(t), server.ErrConnectionRefused},
		"silent listener":  {listen(t, silent), server.ErrNoAnswer},
		"HTTP server":      {listen(t, httpServer), server.ErrNotMongoDB},
		"garbage answerer": {listen(t, garbage), server.ErrNotMongoDB},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, err := Open(ctx, "mongodb://"+c.addr+"/", Config{ConnectTimeout: bound, PingInterval: 20 * time.Millisecond}, noBuild(t))
			require.Error(t, err)
			t.Log(err)
			assert.ErrorIs(t, err, c.want)
			for _, other := range []error{server.ErrConnectionRefused, server.ErrNoAnswer, server.ErrNotMongoDB, server.ErrAuthFailed} {
				if other != c.want {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "server at "+c.addr+" not reachable")
			assert.Contains(t, err.Error(), "Connection.ConnectTimeout, "+bound.String())
		})
	}
}

// A deadline of the caller wins over ConnectTimeout, shorter or longer: Open tries until it
// passes, and its error does not blame ConnectTimeout.
func TestOpenCallerDeadlineWins(t *testing.T) {
	addr := closedPort(t)
	for name, c := range map[string]struct{ deadline, connectTimeout time.Duration }{
		"shorter": {300 * time.Millisecond, time.Hour},
		"longer":  {600 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			_, err := Open(ctx, "mongodb://"+addr+"/", Config{ConnectTimeout: c.connectTimeout, PingInterval: 20 * time.Millisecond}, noBuild(t))
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, server.ErrConnectionRefused)
			assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "Open tried until the caller's deadline")
			assert.NotContains(t, err.Error(), "ConnectTimeout")
		})
	}
}

// OpenClient bounds its pings by ConnectTimeout too, and names the address it tried.
func TestOpenClientGivesUpAfterConnectTimeout(t *testing.T) {
	addr := listen(t, silent)
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/"))
	require.NoError(t, err)
	defer func() { _ = client.Disconnect(context.Background()) }()
	_, err = OpenClient(context.Background(), client, Config{ConnectTimeout: 300 * time.Millisecond, PingInterval: 20 * time.Millisecond}, noBuild(t))
	assert.ErrorIs(t, err, server.ErrNoAnswer)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "server at "+addr+" not reachable")
	assert.Contains(t, err.Error(), "Connection.ConnectTimeout")
}

// The bound covers what Open asks once the server answers: a build that waits past it gets
// a context that ends at ConnectTimeout.
func TestOpenBoundCoversBuild(t *testing.T) {
	_, err := Open(context.Background(), srv.URI, Config{ConnectTimeout: 2 * time.Second, PingInterval: 20 * time.Millisecond},
		func(ctx context.Context, client *mongo.Client, _ bool) (struct{}, error) {
			_, ok := ctx.Deadline()
			assert.True(t, ok, "the build runs within ConnectTimeout")
			<-ctx.Done()
			return struct{}{}, ctx.Err()
		})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "Connection.ConnectTimeout, 2s")
}

// Credentials the server refuses are not retried: Open fails with ErrAuthFailed without
// waiting for ConnectTimeout, and never shows the password. A server that does not check
// credentials opens.
func TestOpenAuthFailed(t *testing.T) {
	host := strings.TrimPrefix(srv.URI, "mongodb://")
	uri := "mongodb://alice:s3cr3t-pw@" + host
	var opened bool
	_, err := Open(context.Background(), uri, Config{ConnectTimeout: time.Hour, PingInterval: 20 * time.Millisecond},
		func(context.Context, *mongo.Client, bool) (struct{}, error) {
			opened = true
			return struct{}{}, nil
		})
	if opened {
		require.NoError(t, err)
		t.Log("the server does not check credentials")
		return
	}
	t.Log(err)
	assert.ErrorIs(t, err, server.ErrAuthFailed)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "refused credentials are not retried until a deadline")
	assert.NotContains(t, err.Error(), "s3cr3t-pw")
}
