package aio

import (
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/ops"
)

// Profile is the kind of server a store talks to. Each operation picks its formulation by it:
// the MongoDB-native one on MongoDB, a correct equivalent where FerretDB lacks a feature (see
// the README's server matrix). Every store of the module shares it.
type Profile = connect.Profile

// The profiles.
const (
	// Detect takes the profile the server's answers call for at Open: FerretDB for FerretDB
	// 1.x, MongoDB for every other server (see Family).
	Detect = connect.Detect
	// MongoDB uses every native formulation: MongoDB 4.4 or newer, and FerretDB 2.x.
	MongoDB = connect.MongoDB
	// FerretDB uses the formulations that FerretDB 1.x serves correctly.
	FerretDB = connect.FerretDB
)

// Family is what kind of server a store talks to, as the server's own answers to hello and
// buildInfo tell at Open; ServerInfo.Family holds it. It names the server; the Profile, not
// the family, selects the formulations.
type Family = connect.Family

// The families. Each constant's documentation names the marker it is told by and the profile
// Detect gives it.
const (
	// FamilyUnknown: the answers name no family (buildInfo refused with another error than
	// the Stable API's). Detect gives it the MongoDB profile.
	FamilyUnknown = connect.FamilyUnknown
	// FamilyMongoDB: MongoDB, or a server that answers as it does (Amazon DocumentDB has no
	// marker of its own). Profile MongoDB.
	FamilyMongoDB = connect.FamilyMongoDB
	// FamilyFerretDB1: FerretDB 1.x (buildInfo.ferretdbVersion). Profile FerretDB.
	FamilyFerretDB1 = connect.FamilyFerretDB1
	// FamilyFerretDB2: FerretDB 2.x, on PostgreSQL's DocumentDB extension
	// (buildInfo.ferretdb.version). Profile MongoDB.
	FamilyFerretDB2 = connect.FamilyFerretDB2
	// FamilyDocumentDB: another server on the DocumentDB extension, the DocumentDB gateway
	// or Azure Cosmos DB for MongoDB vCore (hello.internal.documentdb_versions). Profile
	// MongoDB.
	FamilyDocumentDB = connect.FamilyDocumentDB
	// FamilyCosmosDB: Azure Cosmos DB for MongoDB, RU-based (buildInfo._t). Profile MongoDB,
	// untried.
	FamilyCosmosDB = connect.FamilyCosmosDB
)

// ServerInfo is what a store learned of its server at Open: its Profile, its Family, the
// MongoDB Version buildInfo reports (empty under a strict Stable API), hello's MaxWireVersion
// and, for FerretDB 1.x and 2.x, FerretDBVersion. Open refuses (execstore.ErrInvalid) a
// server older than MongoDB 4.4, whatever Options.Profile says.
type ServerInfo = connect.ServerInfo

// opsProfile is p as package ops names it.
func opsProfile(p Profile) ops.Profile {
	switch p {
	case MongoDB:
		return ops.MongoDB
	case FerretDB:
		return ops.FerretDB
	}
	return 0
}
