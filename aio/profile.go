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
	// Detect asks the server at Open (buildInfo: FerretDB answers with ferretdbVersion).
	Detect = connect.Detect
	// MongoDB uses every native formulation.
	MongoDB = connect.MongoDB
	// FerretDB uses the formulations that FerretDB 1.x serves correctly.
	FerretDB = connect.FerretDB
)

// ServerInfo is what a store learned of its server at Open: its Profile, Version and, for
// FerretDB, FerretDBVersion.
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
