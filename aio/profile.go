package aio

import "github.com/execstore/execstore/ops"

// Profile is the kind of server a store talks to. Each operation picks its formulation by it:
// the MongoDB-native one on MongoDB, a correct equivalent where FerretDB lacks a feature (see
// the README's server matrix).
type Profile int

// The profiles.
const (
	// Detect asks the server at Open (buildInfo: FerretDB answers with ferretdbVersion).
	Detect Profile = iota
	// MongoDB uses every native formulation.
	MongoDB
	// FerretDB uses the formulations that FerretDB 1.x serves correctly.
	FerretDB
)

func (p Profile) String() string {
	switch p {
	case Detect:
		return "detect"
	case MongoDB:
		return "mongodb"
	case FerretDB:
		return "ferretdb"
	}
	return "unknown"
}

// ServerInfo is what a store learned of its server at Open.
type ServerInfo struct {
	Profile         Profile
	Version         string // the MongoDB version the server reports
	FerretDBVersion string // set when the server is FerretDB
}

func (p Profile) ops() ops.Profile {
	switch p {
	case MongoDB:
		return ops.MongoDB
	case FerretDB:
		return ops.FerretDB
	}
	return 0
}
