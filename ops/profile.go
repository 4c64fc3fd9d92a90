package ops

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
)

// Detect returns the profile of client's server (see connect.DetectServer): FerretDB for
// FerretDB 1.x, MongoDB for every other server, FerretDB 2.x included. It does not refuse an
// old server; a store's Open does.
func Detect(ctx context.Context, client *mongo.Client) (Profile, error) {
	s, err := connect.DetectServer(ctx, client)
	if err != nil {
		return 0, err
	}
	return ProfileOf(s), nil
}

// ProfileOf is the profile of a detected server: FerretDB when its answers call for the
// FerretDB formulations, MongoDB otherwise.
func ProfileOf(s connect.Server) Profile {
	if s.Profile == connect.FerretDB {
		return FerretDB
	}
	return MongoDB
}
