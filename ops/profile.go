package ops

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
)

// Detect returns the profile of client's server (see connect.Detect).
func Detect(ctx context.Context, client *mongo.Client) (Profile, error) {
	s, err := connect.DetectServer(ctx, client)
	if err != nil {
		return 0, err
	}
	return ProfileOf(s), nil
}

// ProfileOf is the profile of a detected server.
func ProfileOf(s connect.Server) Profile {
	if s.FerretDB {
		return FerretDB
	}
	return MongoDB
}
