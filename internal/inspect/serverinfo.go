package inspect

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/server"
)

// Server is what the server is, as the stores identify it at Open.
type Server struct {
	Family          string `json:"family"`                     // mongodb, ferretdb1, ferretdb2, documentdb, cosmosdb, unknown
	Version         string `json:"version"`                    // the MongoDB version it reports or emulates
	MaxWireVersion  int    `json:"max_wire_version"`           // from hello
	FerretDBVersion string `json:"ferretdb_version,omitempty"` // FerretDB only
	// Profile is the formulations aio picks for it, by the probe it opens with (a find that
	// matches no document). idem probes with an update that matches none, which a read-only
	// reader does not send: its store's Server() reports its own.
	Profile string         `json:"profile"`
	Probes  []server.Probe `json:"probes"`
}

// IdentifyServer reads what the server is: hello and buildInfo, as the stores ask them, and
// what aio's probe finds on the executions collection coll.
func IdentifyServer(ctx context.Context, coll *mongo.Collection) (*Server, error) {
	s, err := connect.DetectServer(ctx, coll.Database().Client())
	if err != nil {
		return nil, err
	}
	p, err := connect.ProbeExpressionProjections(ctx, coll)
	if err != nil {
		return nil, err
	}
	return &Server{Family: string(s.Family), Version: s.Version,
		MaxWireVersion: s.MaxWireVersion, FerretDBVersion: s.FerretDBVersion,
		Profile: string(connect.Choose(server.Detect, p)), Probes: []server.Probe{p}}, nil
}
