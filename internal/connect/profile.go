package connect

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Profile is the kind of server a store talks to; each store picks its formulations by it.
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

// Identify returns what client's server is: forced, when it is not Detect, or what Detect
// finds.
func Identify(ctx context.Context, client *mongo.Client, forced Profile) (ServerInfo, error) {
	if forced != Detect {
		return ServerInfo{Profile: forced}, nil
	}
	s, err := DetectServer(ctx, client)
	if err != nil {
		return ServerInfo{}, err
	}
	info := ServerInfo{Profile: MongoDB, Version: s.Version, FerretDBVersion: s.FerretDBVersion}
	if s.FerretDB {
		info.Profile = FerretDB
	}
	return info, nil
}
