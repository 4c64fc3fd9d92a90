package connect

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/server"
)

// The server vocabulary is package server's; these names keep the package's own code short.
type (
	Profile    = server.Profile
	Family     = server.Family
	ServerInfo = server.Info
)

// The profiles and families, as package server declares them.
const (
	Detect   = server.Detect
	MongoDB  = server.MongoDB
	FerretDB = server.FerretDB

	FamilyUnknown    = server.FamilyUnknown
	FamilyMongoDB    = server.FamilyMongoDB
	FamilyFerretDB1  = server.FamilyFerretDB1
	FamilyFerretDB2  = server.FamilyFerretDB2
	FamilyDocumentDB = server.FamilyDocumentDB
	FamilyCosmosDB   = server.FamilyCosmosDB
)

// Identify returns what client's server is and a first profile: forced, when it is not
// Detect, or else the one its family suggests, which a store with more than one formulation
// replaces by what its probes find (see Choose). It always asks the server (two commands, see
// DetectServer), and refuses, with an error matching execstore.ErrInvalid, a server older than
// MongoDB 4.4 (hello's maxWireVersion below 9, or buildInfo's version below 4.4) whatever the
// profile.
func Identify(ctx context.Context, client *mongo.Client, forced Profile) (ServerInfo, error) {
	return identify(ctx, adminCommands(client), forced)
}

// identify is Identify over run.
func identify(ctx context.Context, run commandRunner, forced Profile) (ServerInfo, error) {
	s, err := detect(ctx, run)
	if err != nil {
		return ServerInfo{}, err
	}
	info := s.ServerInfo
	if forced != Detect {
		info.Profile = forced
	}
	if err := checkVersion(info); err != nil {
		return ServerInfo{}, err
	}
	return info, nil
}
