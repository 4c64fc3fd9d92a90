package connect

// Detection asks the server two commands on the admin database and reads markers that each
// kind of server puts in its answers:
//
//	hello      maxWireVersion (every server);
//	           internal.documentdb_versions or internal.cosmos_versions (the DocumentDB gateway,
//	           Azure Cosmos DB for MongoDB vCore)
//	buildInfo  version (every server; FerretDB and DocumentDB report the MongoDB version they
//	           emulate);
//	           ferretdbVersion (FerretDB 1.x); ferretdb: {version: …} (FerretDB 2.x);
//	           _t (Azure Cosmos DB for MongoDB, RU)
//
// hello is in the Stable API (version 1) and never refused; buildInfo is not, so a MongoDB
// client with a strict Stable API is refused it (APIStrictError). Then only hello's markers
// are read: MongoDB is told by the refusal itself (a server without the Stable API does not
// refuse), the DocumentDB family by hello's, and FerretDB 1.x cannot be told — it does not
// enforce the Stable API and answers buildInfo whatever the client asks, so this never costs
// it its profile.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/contract"
)

// Server-side error codes detection branches on.
const (
	codeCommandNotFound = 59  // a server older than hello (MongoDB 4.4.2, 4.2.10) knows isMaster only
	codeAPIStrictError  = 323 // a strict Stable API client asked for a command outside the API
)

// Server is what DetectServer learns of the server: ServerInfo with the detected profile, and
// FerretDB for callers that only ask whether the FerretDB profile applies.
type Server struct {
	ServerInfo
	// FerretDB is Profile == FerretDB: the server is FerretDB 1.x (FamilyFerretDB1) and needs
	// the FerretDB formulations. FerretDB 2.x serves the MongoDB ones and leaves it false.
	FerretDB bool
}

// DetectServer asks client's server what it is, with hello then buildInfo (see Family for
// the markers each family answers with), and returns the profile its answers call for. It
// does not judge the version: Identify refuses a server too old for the stores.
//
// A buildInfo the server refuses (a client with a strict Stable API) leaves Version empty and
// the family to hello; any other failure of either command is an error.
func DetectServer(ctx context.Context, client *mongo.Client) (Server, error) {
	return detect(ctx, adminCommands(client))
}

// commandRunner runs one command on the admin database and returns the server's reply; a
// reply with ok: 0 is a mongo.CommandError, as the driver returns it.
type commandRunner func(ctx context.Context, cmd bson.D) (bson.Raw, error)

// adminCommands runs commands on client's admin database.
func adminCommands(client *mongo.Client) commandRunner {
	admin := client.Database("admin")
	return func(ctx context.Context, cmd bson.D) (bson.Raw, error) {
		return admin.RunCommand(ctx, cmd).Raw()
	}
}

// detect is DetectServer over run, which tests replace with recorded replies.
func detect(ctx context.Context, run commandRunner) (Server, error) {
	hello, err := run(ctx, bson.D{{Key: "hello", Value: 1}})
	if err != nil && refusedWith(ctx, err, codeCommandNotFound) {
		hello, err = run(ctx, bson.D{{Key: "isMaster", Value: 1}})
	}
	if err != nil {
		return Server{}, fmt.Errorf("execstore: detecting the server: hello: %w", err)
	}
	build, err := run(ctx, bson.D{{Key: "buildInfo", Value: 1}})
	strict := false
	if err != nil {
		if !refusedWith(ctx, err, 0) {
			return Server{}, fmt.Errorf("execstore: detecting the server: buildInfo: %w", err)
		}
		build, strict = nil, refusedWith(ctx, err, codeAPIStrictError)
	}
	info := classify(hello, build, strict)
	return Server{ServerInfo: info, FerretDB: info.Profile == FerretDB}, nil
}

// refusedWith reports whether err is the server refusing the command (an error reply, not a
// lost connection or a deadline), with code unless code is 0.
func refusedWith(ctx context.Context, err error, code int32) bool {
	var ce mongo.CommandError
	if ctx.Err() != nil || !errors.As(err, &ce) || ce.Code == 0 || mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return false
	}
	return code == 0 || ce.Code == code
}

// classify reads the families' markers in hello and buildInfo (nil when refused; strict when
// refused with APIStrictError).
func classify(hello, build bson.Raw, strict bool) ServerInfo {
	info := ServerInfo{Family: FamilyUnknown, Profile: MongoDB}
	if n, ok := hello.Lookup("maxWireVersion").AsInt64OK(); ok {
		info.MaxWireVersion = int(n)
	}
	documentDB := hasKey(hello, "internal", "documentdb_versions") || hasKey(hello, "internal", "cosmos_versions")
	if build == nil {
		switch {
		case documentDB:
			info.Family = FamilyDocumentDB
		case strict:
			info.Family = FamilyMongoDB
		}
		return info
	}
	info.Version, _ = build.Lookup("version").StringValueOK()
	switch {
	case hasKey(build, "ferretdbVersion"):
		info.Family, info.Profile = FamilyFerretDB1, FerretDB
		info.FerretDBVersion, _ = build.Lookup("ferretdbVersion").StringValueOK()
	case hasKey(build, "ferretdb"):
		info.Family = FamilyFerretDB2
		info.FerretDBVersion, _ = build.Lookup("ferretdb", "version").StringValueOK()
	case documentDB:
		info.Family = FamilyDocumentDB
	case hasKey(build, "_t"):
		info.Family = FamilyCosmosDB
	default:
		info.Family = FamilyMongoDB
	}
	return info
}

// hasKey reports whether doc has a value at path.
func hasKey(doc bson.Raw, path ...string) bool {
	if doc == nil {
		return false
	}
	_, err := doc.LookupErr(path...)
	return err == nil
}

// minWireVersion and minVersion are the oldest server the stores' formulations run on:
// MongoDB 4.4, the first with aggregation expressions in find projections; $$NOW in update
// pipelines came with 4.2.
const (
	minWireVersion = 9
	minMajor       = 4
	minMinor       = 4
)

// checkVersion refuses a server older than MongoDB 4.4 by either measure it gave: hello's
// maxWireVersion or buildInfo's version. A measure the server did not give refuses nothing.
func checkVersion(info ServerInfo) error {
	var said []string
	old := false
	if info.Version != "" {
		said = append(said, "MongoDB "+info.Version)
		if major, minor, ok := parseVersion(info.Version); ok && (major < minMajor || major == minMajor && minor < minMinor) {
			old = true
		}
	}
	if info.MaxWireVersion > 0 {
		said = append(said, "wire version "+strconv.Itoa(info.MaxWireVersion))
		old = old || info.MaxWireVersion < minWireVersion
	}
	if !old {
		return nil
	}
	return contract.Invalid("server", "reports %s; the stores need MongoDB 4.4 or newer (wire version %d) "+
		"for aggregation expressions in find projections and $$NOW in update pipelines", strings.Join(said, ", "), minWireVersion)
}

// parseVersion reads the major and minor numbers of a version such as "4.4.29" or "8.0-rc1".
func parseVersion(v string) (major, minor int, ok bool) {
	majorText, rest, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	major, err1 := strconv.Atoi(majorText)
	minor, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}
