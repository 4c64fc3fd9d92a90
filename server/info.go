package server

// Profile is the kind of server a store talks to, as its formulations need it: every store
// of the module (aio, idem, journal) picks the commands it sends by it. Connection.Profile
// forces one; by default (Detect) it follows the server's Family.
type Profile string

// The profiles.
const (
	// Detect, the zero Profile, takes the profile the server's answers call for at Open:
	// FerretDB for FerretDB 1.x, MongoDB for every other server (see Family).
	Detect Profile = ""
	// MongoDB uses every native formulation: MongoDB 4.4 or newer, and FerretDB 2.x.
	MongoDB Profile = "mongodb"
	// FerretDB uses the formulations that FerretDB 1.x serves correctly.
	FerretDB Profile = "ferretdb"
)

// Family is what kind of server answers, as its own answers to hello and buildInfo tell. It
// names the server; the profile, not the family, selects the formulations.
type Family string

// The families, by the marker each answers with.
const (
	// FamilyUnknown: the answers name no family, which happens only when buildInfo was refused
	// with another error than the Stable API's. Such a server gets the MongoDB profile.
	FamilyUnknown Family = "unknown"
	// FamilyMongoDB: buildInfo without any marker below, or buildInfo refused because the
	// client asked for a strict Stable API (only servers that have one refuse). Amazon
	// DocumentDB has no marker of its own in these answers and is taken for MongoDB at the
	// version it reports: its 4.0 is refused, a newer one gets the MongoDB profile, which the
	// stores have not been tried on.
	FamilyMongoDB Family = "mongodb"
	// FamilyFerretDB1 is FerretDB 1.x: buildInfo has ferretdbVersion (an embedded build says
	// "unknown"). Its profile is FerretDB. It answers buildInfo whatever the client's Stable API
	// options, so it is told apart under a strict one too.
	FamilyFerretDB1 Family = "ferretdb1"
	// FamilyFerretDB2 is FerretDB 2.x, on PostgreSQL's DocumentDB extension: buildInfo has
	// ferretdb: {version} and no ferretdbVersion. The engine serves the MongoDB formulations
	// (measured with FerretDB 2.5): its profile is MongoDB. It runs writes concurrently and
	// locks rows, which the stores' formulations allow for (see package internal/unique and
	// the statement order of ops). When buildInfo is refused, a FerretDB 2.x is told only by
	// hello's DocumentDB marker (FamilyDocumentDB), or else taken for MongoDB, with the same
	// profile.
	FamilyFerretDB2 Family = "ferretdb2"
	// FamilyDocumentDB is another server on the DocumentDB extension: the DocumentDB gateway
	// and Azure Cosmos DB for MongoDB vCore (hello has internal.documentdb_versions, or
	// internal.cosmos_versions on older ones). The same engine as FerretDB 2.x: profile
	// MongoDB.
	FamilyDocumentDB Family = "documentdb"
	// FamilyCosmosDB is Azure Cosmos DB for MongoDB, RU-based: buildInfo has a _t field. It
	// gets the MongoDB profile if its version passes (its 4.2 does not), which the stores have
	// not been tried on.
	FamilyCosmosDB Family = "cosmosdb"
)

// Info is what a store learned of its server at Open: the profile it uses and what the
// server is. Every field but Profile comes from the server's own answers, whatever the profile.
type Info struct {
	// Profile selects the store's formulations: the one forced by Connection.Profile, or else the
	// detected one (FerretDB for FamilyFerretDB1, MongoDB for every other family).
	Profile Profile
	// Family is what kind of server answered.
	Family Family
	// Version is the MongoDB version buildInfo reports; FerretDB and DocumentDB report the
	// version they emulate ("7.0.42" for the embedded FerretDB 1.24). Empty when buildInfo was
	// refused (a client with a strict Stable API on MongoDB): then MaxWireVersion alone says
	// how new the server is.
	Version string
	// MaxWireVersion is the newest wire protocol version hello reports: 9 for MongoDB 4.4, 13
	// for 5.0, 17 for 6.0, 21 for 7.0 (and for FerretDB), 25 for 8.0. 0 when hello has none.
	MaxWireVersion int
	// FerretDBVersion is the FerretDB release buildInfo reports ("v2.5.0"; an embedded 1.x
	// build says "unknown"). Set for FamilyFerretDB1 and FamilyFerretDB2; empty for every
	// other server.
	FerretDBVersion string
}
