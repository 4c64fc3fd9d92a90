package connect

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/testserver"
)

// connectPlain returns a client of the test's own to the test server, without API options,
// disconnected when t ends.
func connectPlain(t *testing.T) *mongo.Client {
	t.Helper()
	client, err := Dial(context.Background(), srv.URI, Config{PingInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// liveReplies returns the server's own hello and buildInfo through client.
func liveReplies(t *testing.T, client *mongo.Client) (hello, build bson.Raw) {
	t.Helper()
	run := adminCommands(client)
	hello, err := run(context.Background(), bson.D{{Key: "hello", Value: 1}})
	require.NoError(t, err)
	build, err = run(context.Background(), bson.D{{Key: "buildInfo", Value: 1}})
	require.NoError(t, err)
	return hello, build
}

// wantFamily is what detection must say of the test server, read off its replies by their
// plainest marks: the embedded server is FerretDB 1.x; a server MONGODB_URI names is MongoDB
// unless it carries a FerretDB or DocumentDB field.
func wantFamily(t *testing.T, hello, build bson.Raw) Family {
	if !srv.External {
		return FamilyFerretDB1
	}
	for _, marked := range []bool{hasKey(build, "ferretdbVersion"), hasKey(build, "ferretdb"), hasKey(hello, "internal")} {
		if marked {
			t.Logf("MONGODB_URI names a server that is not MongoDB: %s", build)
			return FamilyUnknown // not asserted
		}
	}
	return FamilyMongoDB
}

// Detection on the test server: FerretDB 1.x with its profile on the embedded server, MongoDB
// on a MongoDB that MONGODB_URI names, and the version check lets either through.
func TestIdentifyTestServer(t *testing.T) {
	client := connectPlain(t)
	hello, build := liveReplies(t, client)
	info, err := Identify(context.Background(), client, Detect)
	require.NoError(t, err)
	t.Logf("%+v", info)

	version, _ := build.Lookup("version").StringValueOK()
	wire, _ := hello.Lookup("maxWireVersion").AsInt64OK()
	assert.Equal(t, version, info.Version)
	assert.EqualValues(t, wire, info.MaxWireVersion)
	switch wantFamily(t, hello, build) {
	case FamilyFerretDB1:
		release, _ := build.Lookup("ferretdbVersion").StringValueOK()
		assert.Equal(t, ServerInfo{Profile: FerretDB, Family: FamilyFerretDB1, Version: version,
			MaxWireVersion: int(wire), FerretDBVersion: release}, info)
	case FamilyMongoDB:
		assert.Equal(t, ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, Version: version,
			MaxWireVersion: int(wire)}, info)
	}
}

// The recorded replies of the embedded server are what it answers today, on every field
// detection reads.
func TestRecordedEmbeddedReplies(t *testing.T) {
	srv.RequireEmbedded(t, "checks the recording of the embedded FerretDB's replies")
	hello, build := liveReplies(t, connectPlain(t))
	rec := loadReplies(t)["ferretdb-1.24-embedded"]
	for _, path := range [][]string{{"version"}, {"versionArray"}, {"ferretdbVersion"}, {"maxBsonObjectSize"}} {
		assert.Equal(t, rec["buildInfo"].Lookup(path...).String(), build.Lookup(path...).String(), "buildInfo %v", path)
	}
	for _, path := range [][]string{{"maxWireVersion"}, {"minWireVersion"}, {"isWritablePrimary"}, {"internal"}, {"setName"}} {
		assert.Equal(t, rec["hello"].Lookup(path...).String(), hello.Lookup(path...).String(), "hello %v", path)
	}
	assert.False(t, hasKey(hello, "ferretdbVersion"), "hello carries no FerretDB marker")
}

// strictMonitor records, for each command name, the apiStrict the driver sent it with and
// whether the server answered it.
type strictMonitor struct {
	mu       sync.Mutex
	strict   map[string]bool
	answered map[string]bool
	refused  map[string]int32
}

func (m *strictMonitor) monitor() *event.CommandMonitor {
	m.strict, m.answered, m.refused = map[string]bool{}, map[string]bool{}, map[string]int32{}
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.strict[e.CommandName], _ = e.Command.Lookup("apiStrict").BooleanOK()
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.answered[e.CommandName] = true
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if ce, ok := e.Failure.(mongo.CommandError); ok {
				m.refused[e.CommandName] = ce.Code
			}
		},
	}
}

// A store's Open with a client that asks for a strict Stable API: on MongoDB buildInfo is
// refused (APIStrictError) and hello alone says MongoDB; the embedded FerretDB 1.24 does not
// enforce the API and answers buildInfo, so it keeps its family and profile.
func TestOpenStrictStableAPI(t *testing.T) {
	plain, err := DetectServer(context.Background(), connectPlain(t))
	require.NoError(t, err)
	if plain.MaxWireVersion < 13 {
		t.Skipf("the server (wire version %d) predates the Stable API (MongoDB 5.0)", plain.MaxWireVersion)
	}

	var m strictMonitor
	copts := options.Client().SetMonitor(m.monitor()).
		SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1).SetStrict(true))
	ctx := context.Background()
	type opened struct {
		client *mongo.Client
		info   ServerInfo
	}
	o, err := Open(ctx, srv.URI, Config{ClientOptions: copts, PingInterval: 50 * time.Millisecond},
		func(ctx context.Context, client *mongo.Client, _ bool) (opened, error) {
			info, err := Identify(ctx, client, Detect)
			if err != nil {
				return opened{}, err
			}
			// The write concern probe: an update, under the strict API too.
			_, err = Database(ctx, client, testserver.Database(t, "connect"), nil, nil, true, "probe")
			return opened{client, info}, err
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.client.Disconnect(context.Background()) })
	t.Logf("strict: %+v; buildInfo answered: %v, refused with code %d", o.info, m.answered["buildInfo"], m.refused["buildInfo"])

	m.mu.Lock()
	defer m.mu.Unlock()
	assert.True(t, m.strict["hello"] && m.strict["buildInfo"], "the client sent both strict: %v", m.strict)
	assert.Equal(t, plain.Family, o.info.Family)
	assert.Equal(t, plain.Profile, o.info.Profile)
	assert.Equal(t, plain.MaxWireVersion, o.info.MaxWireVersion)
	if !srv.External {
		assert.True(t, m.answered["buildInfo"], "the embedded FerretDB answers buildInfo under a strict API")
		assert.Equal(t, FamilyFerretDB1, o.info.Family)
		assert.Equal(t, plain.Version, o.info.Version)
		return
	}
	if m.answered["buildInfo"] {
		assert.Equal(t, plain.Version, o.info.Version)
	} else {
		assert.EqualValues(t, codeAPIStrictError, m.refused["buildInfo"])
		assert.Empty(t, o.info.Version, "buildInfo refused: no version")
	}
}

// The fallback to hello alone, on the test server's own hello with buildInfo refused as
// MongoDB refuses it to a strict client. hello has no FerretDB marker, so the embedded
// FerretDB 1.x is taken for MongoDB here — which never happens to it for real, since it
// answers buildInfo whatever the client's API options (TestOpenStrictStableAPI).
func TestIdentifyBuildInfoRefused(t *testing.T) {
	client := connectPlain(t)
	hello, build := liveReplies(t, client)
	real := adminCommands(client)
	var sent []string
	refuseBuildInfo := func(ctx context.Context, cmd bson.D) (bson.Raw, error) {
		sent = append(sent, cmd[0].Key)
		if cmd[0].Key == "buildInfo" {
			return nil, mongo.CommandError{Code: codeAPIStrictError, Name: "APIStrictError",
				Message: "Provided apiStrict:true, but the command buildInfo is not in API Version 1"}
		}
		return real(ctx, cmd)
	}
	info, err := identify(context.Background(), refuseBuildInfo, Detect)
	require.NoError(t, err)
	wire, _ := hello.Lookup("maxWireVersion").AsInt64OK()
	assert.Equal(t, []string{"hello", "buildInfo"}, sent)
	if wantFamily(t, hello, build) != FamilyUnknown {
		assert.Equal(t, ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, MaxWireVersion: int(wire)}, info)
	}
}

// The FerretDB release reaches server.Info. FerretDB 1.x reports it as buildInfo's
// ferretdbVersion (and serverStatus' too), which an embedded build would leave "unknown"; the
// embedded server stamps the release of the FerretDB module it is built from (go.mod's
// v1.24.2). FerretDB 2.x reports it as buildInfo's ferretdb.version.
func TestFerretDBVersion(t *testing.T) {
	client := connectPlain(t)
	hello, build := liveReplies(t, client)
	var status bson.Raw
	status, err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		t.Logf("serverStatus refused: %v", err)
	}
	t.Logf("buildInfo ferretdbVersion=%v ferretdb=%v; serverStatus ferretdbVersion=%v; hello has ferretdb markers: %v",
		build.Lookup("ferretdbVersion"), build.Lookup("ferretdb"), status.Lookup("ferretdbVersion"), hasKey(hello, "ferretdbVersion"))

	s, err := DetectServer(context.Background(), client)
	require.NoError(t, err)
	t.Logf("detected: %v", s.ServerInfo)
	switch {
	case !srv.External:
		assert.Equal(t, FamilyFerretDB1, s.Family)
		assert.Equal(t, "v1.24.2", s.FerretDBVersion)
		assert.Regexp(t, `^FerretDB 1\.24\.2 \(MongoDB 7\.0\.\d+ wire 21, profile ferretdb\)$`, s.ServerInfo.String())
	case s.Family == FamilyFerretDB1:
		assert.Regexp(t, `^v1\.`, s.FerretDBVersion)
	case s.Family == FamilyFerretDB2:
		assert.Regexp(t, `^v2\.`, s.FerretDBVersion)
		assert.Regexp(t, `^FerretDB 2\.\d+\.\d+ \(MongoDB \S+ wire \d+, profile mongodb\)$`, s.ServerInfo.String())
	default:
		assert.Empty(t, s.FerretDBVersion)
	}
}
