package ops

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// ServerInfo is what Detect learns of the server.
type ServerInfo struct {
	Profile         Profile
	Version         string // the MongoDB version the server reports
	FerretDBVersion string // set when the server is FerretDB
}

// Detect asks the server's buildInfo which profile it has: FerretDB answers with a
// ferretdbVersion field, MongoDB does not.
func Detect(ctx context.Context, client *mongo.Client) (ServerInfo, error) {
	var info struct {
		Version         string  `bson:"version"`
		FerretDBVersion *string `bson:"ferretdbVersion"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return ServerInfo{}, fmt.Errorf("execstore: detecting the server: %w", err)
	}
	si := ServerInfo{Profile: MongoDB, Version: info.Version}
	if info.FerretDBVersion != nil {
		si.Profile = FerretDB
		si.FerretDBVersion = *info.FerretDBVersion
	}
	return si, nil
}
