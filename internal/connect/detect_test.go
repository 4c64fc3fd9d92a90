package connect

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// recorded is one server's replies, by command name, from testdata/replies.json.
type recorded map[string]bson.Raw

// loadReplies reads testdata/replies.json: for each server, its replies to hello, isMaster
// and buildInfo (a command it does not know is absent), with a note on where they come from.
func loadReplies(t testing.TB) map[string]recorded {
	t.Helper()
	data, err := os.ReadFile("testdata/replies.json")
	require.NoError(t, err)
	var file map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &file))
	servers := make(map[string]recorded, len(file))
	for server, entries := range file {
		replies := recorded{}
		for name, ext := range entries {
			if name == "about" {
				continue
			}
			var doc bson.Raw
			require.NoError(t, bson.UnmarshalExtJSON(ext, false, &doc), "%s %s", server, name)
			replies[name] = doc
		}
		servers[server] = replies
	}
	return servers
}

// replay answers commands with r's replies, as the driver would hand them over: an ok: 0
// reply is a mongo.CommandError, a command r has no reply to is CommandNotFound. sent
// collects every command document, in order.
func (r recorded) replay(sent *[]string) commandRunner {
	return func(_ context.Context, cmd bson.D) (bson.Raw, error) {
		ext, err := bson.MarshalExtJSON(cmd, true, false)
		if err != nil {
			return nil, err
		}
		*sent = append(*sent, string(ext))
		reply, found := r[cmd[0].Key]
		if !found {
			return nil, mongo.CommandError{Code: codeCommandNotFound, Name: "CommandNotFound",
				Message: "no such command: '" + cmd[0].Key + "'"}
		}
		if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
			code, _ := reply.Lookup("code").AsInt64OK()
			name, _ := reply.Lookup("codeName").StringValueOK()
			msg, _ := reply.Lookup("errmsg").StringValueOK()
			return nil, mongo.CommandError{Code: int32(code), Name: name, Message: msg, Raw: reply}
		}
		return reply, nil
	}
}

const (
	helloCmd     = `{"hello":{"$numberInt":"1"}}`
	isMasterCmd  = `{"isMaster":{"$numberInt":"1"}}`
	buildInfoCmd = `{"buildInfo":{"$numberInt":"1"}}`
)

// Detection from each server's replies: the family, the profile Detect gives it, the
// versions it reports, the commands it costs, and the refusal of a server older than 4.4.
func TestIdentifyFromReplies(t *testing.T) {
	servers := loadReplies(t)
	for _, tc := range []struct {
		server string
		forced Profile
		want   ServerInfo
		sent   []string
		old    bool // refused: older than MongoDB 4.4
	}{
		{server: "mongodb-7.0",
			want: ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, Version: "7.0.14", MaxWireVersion: 21}},
		{server: "mongodb-7.0", forced: FerretDB,
			want: ServerInfo{Profile: FerretDB, Family: FamilyMongoDB, Version: "7.0.14", MaxWireVersion: 21}},
		{server: "mongodb-7.0-strict",
			want: ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, MaxWireVersion: 21}},
		{server: "mongodb-4.4.1", sent: []string{helloCmd, isMasterCmd, buildInfoCmd},
			want: ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, Version: "4.4.1", MaxWireVersion: 9}},
		{server: "mongodb-4.2", old: true,
			want: ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, Version: "4.2.24", MaxWireVersion: 8}},
		{server: "mongodb-4.2", forced: FerretDB, old: true,
			want: ServerInfo{Profile: FerretDB, Family: FamilyMongoDB, Version: "4.2.24", MaxWireVersion: 8}},
		{server: "ferretdb-1.24-embedded",
			want: ServerInfo{Profile: FerretDB, Family: FamilyFerretDB1, Version: "7.0.42", MaxWireVersion: 21,
				FerretDBVersion: "v1.24.2"}},
		{server: "ferretdb-2.5",
			want: ServerInfo{Profile: MongoDB, Family: FamilyFerretDB2, Version: "7.0.77", MaxWireVersion: 21,
				FerretDBVersion: "v2.5.0"}},
		{server: "documentdb-gateway",
			want: ServerInfo{Profile: MongoDB, Family: FamilyDocumentDB, Version: "7.0.0", MaxWireVersion: 21}},
		{server: "cosmosdb-vcore-strict",
			want: ServerInfo{Profile: MongoDB, Family: FamilyDocumentDB, MaxWireVersion: 21}},
		{server: "cosmosdb-ru-6.0",
			want: ServerInfo{Profile: MongoDB, Family: FamilyCosmosDB, Version: "6.0.0", MaxWireVersion: 17}},
		{server: "cosmosdb-ru-4.2", old: true,
			want: ServerInfo{Profile: MongoDB, Family: FamilyCosmosDB, Version: "4.2.0", MaxWireVersion: 8}},
		{server: "buildinfo-unauthorized",
			want: ServerInfo{Profile: MongoDB, Family: FamilyUnknown, MaxWireVersion: 21}},
		{server: "version-claims-old", old: true,
			want: ServerInfo{Profile: MongoDB, Family: FamilyMongoDB, Version: "4.2.0", MaxWireVersion: 21}},
	} {
		t.Run(tc.server+"/"+string(tc.forced), func(t *testing.T) {
			replies, found := servers[tc.server]
			require.True(t, found, "no recorded replies for %s", tc.server)
			wantSent := tc.sent
			if wantSent == nil {
				wantSent = []string{helloCmd, buildInfoCmd}
			}

			var sent []string
			s, err := detect(context.Background(), replies.replay(&sent))
			require.NoError(t, err)
			detected := tc.want // DetectServer's profile is the family's, never the forced one
			if tc.forced != Detect {
				detected.Profile = MongoDB
				if tc.want.Family == FamilyFerretDB1 {
					detected.Profile = FerretDB
				}
			}
			assert.Equal(t, detected, s.ServerInfo, "DetectServer")
			assert.Equal(t, detected.Profile == FerretDB, s.FerretDB)
			assert.Equal(t, wantSent, sent, "the commands, exactly")

			sent = nil
			info, err := identify(context.Background(), replies.replay(&sent), tc.forced)
			if tc.old {
				require.ErrorIs(t, err, execstore.ErrInvalid)
				var invalid *execstore.InvalidError
				require.ErrorAs(t, err, &invalid)
				assert.Equal(t, "server", invalid.Field)
				assert.Contains(t, err.Error(), "MongoDB 4.4 or newer")
				assert.Contains(t, err.Error(), tc.want.Version)
				assert.Equal(t, ServerInfo{}, info)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, info, "Identify")
			assert.Equal(t, wantSent, sent)
		})
	}
}

// A failure that is not the server refusing the command (a lost connection, a deadline) is
// an error, not a fallback to hello alone; so is a hello that fails.
func TestDetectFailures(t *testing.T) {
	servers := loadReplies(t)
	lost := mongo.CommandError{Message: "connection reset", Labels: []string{"NetworkError"}}
	for name, fail := range map[string]string{"hello": "hello", "buildInfo": "buildInfo"} {
		t.Run(name, func(t *testing.T) {
			var sent []string
			replay := servers["mongodb-7.0"].replay(&sent)
			run := func(ctx context.Context, cmd bson.D) (bson.Raw, error) {
				if cmd[0].Key == fail {
					return nil, lost
				}
				return replay(ctx, cmd)
			}
			_, err := detect(context.Background(), run)
			require.Error(t, err)
			assert.True(t, mongo.IsNetworkError(err), "the cause is kept: %v", err)
			assert.False(t, errors.Is(err, execstore.ErrInvalid))
			assert.Contains(t, err.Error(), fail)
		})
	}

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var sent []string
		replay := servers["mongodb-7.0-strict"].replay(&sent)
		run := func(ctx context.Context, cmd bson.D) (bson.Raw, error) {
			reply, err := replay(ctx, cmd)
			if cmd[0].Key == "buildInfo" {
				cancel() // the refusal arrives as ctx ends
			}
			return reply, err
		}
		_, err := detect(ctx, run)
		require.Error(t, err, "a refusal seen after ctx ended is not taken for the server's answer")
	})
}

// The version check reads either measure and refuses below MongoDB 4.4 only.
func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		info ServerInfo
		old  bool
	}{
		{ServerInfo{Version: "4.4.0", MaxWireVersion: 9}, false},
		{ServerInfo{Version: "4.3.6"}, true},
		{ServerInfo{Version: "4.2.24"}, true},
		{ServerInfo{Version: "3.6.23", MaxWireVersion: 6}, true},
		{ServerInfo{Version: "8.0.0-rc1", MaxWireVersion: 25}, false},
		{ServerInfo{MaxWireVersion: 8}, true},
		{ServerInfo{MaxWireVersion: 9}, false},
		{ServerInfo{Version: "unparsable", MaxWireVersion: 21}, false},
		{ServerInfo{}, false},
	} {
		err := checkVersion(tc.info)
		if tc.old {
			assert.ErrorIs(t, err, execstore.ErrInvalid, "%+v", tc.info)
		} else {
			assert.NoError(t, err, "%+v", tc.info)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for v, want := range map[string][3]int{
		"4.4.29": {4, 4, 1}, "7.0.42": {7, 0, 1}, "8.0-rc1": {8, 0, 1}, "10.12": {10, 12, 1},
		"": {0, 0, 0}, "7": {0, 0, 0}, "x.1": {0, 0, 0}, "7.x": {0, 0, 0},
	} {
		major, minor, ok := parseVersion(v)
		assert.Equal(t, want, [3]int{major, minor, map[bool]int{true: 1}[ok]}, v)
	}
}
