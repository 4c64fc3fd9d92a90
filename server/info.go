package server

import (
	"strconv"
	"strings"
)

// Profile names the formulations a store sends its commands in. Connection.Profile forces
// one. By default (Detect) each store picks its own at Open by what the server does. It
// probes, with commands that change nothing, the features its MongoDB formulation relies on
// (see Feature). It uses the MongoDB profile where they are served. So two stores of one
// process may use different profiles on one server. Each reports its own in Info.
type Profile string

// The profiles.
const (
	// Detect, the zero Profile, picks the profile by probing the server at Open.
	Detect Profile = ""
	// MongoDB uses every native formulation. It is for MongoDB 4.4 or newer, and for the
	// servers that serve the features it relies on.
	MongoDB Profile = "mongodb"
	// FerretDB uses formulations without the features that FerretDB 1.x lacks: pipeline
	// updates, $$NOW in writes, aggregation expressions in projections. They are correct on
	// every server.
	FerretDB Profile = "ferretdb"
)

// Feature is a capability of the server that a store's formulations differ on, probed at
// Open with a command that changes nothing.
type Feature string

// The features the stores probe.
const (
	// NowInWrites is $$NOW in the aggregation pipeline of a findAndModify and of an update.
	// The MongoDB formulation of idem claims, completes and renews with it. It is probed by
	// sending each, with a filter that matches no document, to the store's collection.
	// FerretDB 1.x refuses pipeline updates. DocumentDB (FerretDB 2.x) refuses $$NOW there
	// unless its operator turned on documentdb.enableVariablesSupportForWriteCommands.
	NowInWrites Feature = "$$NOW in update pipelines"
	// NowInReads is $$NOW in an aggregate ($documents, then $project). Where the server
	// serves it, the FerretDB formulation of idem reads its clock this way: the clock of the
	// engine that stores the records.
	NowInReads Feature = "$$NOW in aggregate"
	// ExpressionProjections is an aggregation expression ($in over $ifNull) in a find
	// projection. The MongoDB formulation of aio loads an execution for an event with it.
	// It is probed by a find that matches no document.
	ExpressionProjections Feature = "aggregation expressions in find projections"
)

// Probe is what one probe at Open found.
type Probe struct {
	Feature Feature `json:"feature"`
	// Served is whether the server answered the probe as the feature needs.
	Served bool `json:"served"`
	// Refusal is the server's answer when it refused the feature ("(FailedToParse) $$NOW is
	// not supported in this context."). It is empty when served.
	Refusal string `json:"refusal,omitempty"`
}

// Family is what kind of server answers, as its own answers to hello and buildInfo tell. It
// names the server. The probes, not the family, select the formulations.
type Family string

// The families, by the marker each answers with.
const (
	// FamilyUnknown is a server whose answers name no family. That happens only when
	// buildInfo was refused with another error than the Stable API's.
	FamilyUnknown Family = "unknown"
	// FamilyMongoDB is a server taken for MongoDB. Its buildInfo has none of the markers
	// below, or buildInfo was refused because the client asked for a strict Stable API (only
	// servers that have one refuse). Amazon DocumentDB has no marker of its own in these
	// answers. It is taken for MongoDB at the version it reports: its 4.0 is refused. The
	// stores have not been tried on a newer one.
	FamilyMongoDB Family = "mongodb"
	// FamilyFerretDB1 is FerretDB 1.x. Its buildInfo has ferretdbVersion. A build embedded
	// in another program says "unknown" there. The module's embedded server reports its
	// release. It refuses every probed feature, so the stores use their FerretDB profile
	// there. It answers buildInfo whatever the client's Stable API options.
	FamilyFerretDB1 Family = "ferretdb1"
	// FamilyFerretDB2 is FerretDB 2.x, on PostgreSQL's DocumentDB extension. Its buildInfo
	// has ferretdb: {version} and no ferretdbVersion. It runs writes concurrently and locks
	// rows, which every formulation allows for. FerretDB 2.5 serves aio's MongoDB
	// formulation. By default it refuses $$NOW in update pipelines (NowInWrites). So idem
	// uses its FerretDB formulation there, unless the server's operator enabled them. When
	// buildInfo is refused, a FerretDB 2.x is told only by hello's DocumentDB marker
	// (FamilyDocumentDB). Without it, it is taken for MongoDB.
	FamilyFerretDB2 Family = "ferretdb2"
	// FamilyDocumentDB is another server on the DocumentDB extension: the DocumentDB gateway
	// or Azure Cosmos DB for MongoDB vCore. Its hello has internal.documentdb_versions, or
	// internal.cosmos_versions on older ones. It is the same engine as FerretDB 2.x.
	FamilyDocumentDB Family = "documentdb"
	// FamilyCosmosDB is Azure Cosmos DB for MongoDB, RU-based. Its buildInfo has a _t field.
	// Its 4.2 is refused as too old. The stores have not been tried on a newer one.
	FamilyCosmosDB Family = "cosmosdb"
)

// Info is what a store learned of its server at Open: the profile it uses and what the
// server is. Every field but Profile comes from the server's own answers, whatever the profile.
type Info struct {
	// Profile selects the store's formulations: the one forced by Connection.Profile, or else
	// the one the probes call for (see Profile).
	Profile Profile
	// Family is what kind of server answered.
	Family Family
	// Version is the MongoDB version buildInfo reports. FerretDB and DocumentDB report the
	// version they emulate ("7.0.42" for the embedded FerretDB 1.24). It is empty when
	// buildInfo was refused (a client with a strict Stable API on MongoDB). Then
	// MaxWireVersion alone says how new the server is.
	Version string
	// MaxWireVersion is the newest wire protocol version hello reports: 9 for MongoDB 4.4, 13
	// for 5.0, 17 for 6.0, 21 for 7.0 (and for FerretDB), 25 for 8.0. It is 0 when hello has
	// none.
	MaxWireVersion int
	// FerretDBVersion is the FerretDB release buildInfo reports ("v2.5.0", "v1.24.2"). A 1.x
	// build embedded in another program says "unknown". It is set for FamilyFerretDB1 and
	// FamilyFerretDB2, and empty for every other server.
	FerretDBVersion string
	// Probes are the features the store probed at Open, in the order it probed them, and
	// what the server answered. The journal, with one formulation, probes nothing. A store
	// whose Profile was forced probes only what it still needs to know.
	Probes []Probe
}

// Served reports whether the store probed f and found it served.
func (i Info) Served(f Feature) bool {
	for _, p := range i.Probes {
		if p.Feature == f {
			return p.Served
		}
	}
	return false
}

// String returns a short human line naming the server, the MongoDB version and wire version
// it reports, and the profile in use: "FerretDB 1.24.2 (MongoDB 7.0.42 wire 21, profile
// ferretdb)". What the server did not report is left out.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Family.name())
	switch v := strings.TrimPrefix(i.FerretDBVersion, "v"); {
	case i.Family != FamilyFerretDB1 && i.Family != FamilyFerretDB2:
	case v != "" && v != "unknown":
		b.WriteString(" " + v)
	case i.Family == FamilyFerretDB1:
		b.WriteString(" 1.x, release not reported")
	default:
		b.WriteString(" 2.x, release not reported")
	}
	var about []string
	if i.Version != "" && i.Family != FamilyMongoDB {
		about = append(about, "MongoDB "+i.Version)
	} else if i.Version != "" {
		b.WriteString(" " + i.Version)
	}
	if i.MaxWireVersion > 0 {
		about = append(about, "wire "+strconv.Itoa(i.MaxWireVersion))
	}
	profile := string(i.Profile)
	if i.Profile == Detect {
		profile = "detect"
	}
	b.WriteString(" (")
	if len(about) > 0 {
		b.WriteString(strings.Join(about, " ") + ", ")
	}
	b.WriteString("profile " + profile + ")")
	return b.String()
}

// name is how String names the family.
func (f Family) name() string {
	switch f {
	case FamilyMongoDB:
		return "MongoDB"
	case FamilyFerretDB1, FamilyFerretDB2:
		return "FerretDB"
	case FamilyDocumentDB:
		return "DocumentDB"
	case FamilyCosmosDB:
		return "Azure Cosmos DB for MongoDB"
	case FamilyUnknown, "":
		return "unknown server"
	}
	return string(f)
}
