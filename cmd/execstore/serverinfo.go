package main

import (
	"context"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
)

// serverOptions are what `server` prints with.
type serverOptions struct {
	output
}

// serverReport is what the server is, as the stores identify it at Open.
type serverReport struct {
	Family          string `json:"family"`           // mongodb, ferretdb1, ferretdb2, documentdb, cosmosdb, unknown
	Version         string `json:"version"`          // the MongoDB version it reports or emulates
	MaxWireVersion  int    `json:"max_wire_version"` // from hello
	FerretDBVersion string `json:"ferretdb_version"` // FerretDB only
	Profile         string `json:"profile"`          // the formulations the stores pick for it
}

// identifyServer prints what the server is: hello and buildInfo, as the stores ask them.
func identifyServer(ctx context.Context, db *mongo.Database, w io.Writer, o serverOptions) error {
	s, err := connect.DetectServer(ctx, db.Client())
	if err != nil {
		return err
	}
	return emit(w, o.output, &serverReport{Family: string(s.Family), Version: s.Version,
		MaxWireVersion: s.MaxWireVersion, FerretDBVersion: s.FerretDBVersion, Profile: string(s.Profile)})
}

func (r *serverReport) writeText(w io.Writer) error {
	return pairs(w, "", [][2]string{
		{"family", orDash(r.Family)},
		{"version", orDash(r.Version)},
		{"max wire version", strconv.Itoa(r.MaxWireVersion)},
		{"ferretdb version", orDash(r.FerretDBVersion)},
		{"profile", orDash(r.Profile)},
	})
}
