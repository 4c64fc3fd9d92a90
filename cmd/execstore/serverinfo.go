package main

import (
	"context"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/server"
)

// serverOptions are what `server` prints with.
type serverOptions struct {
	output
}

// serverReport is what the server is, as the stores identify it at Open.
type serverReport struct {
	Family          string `json:"family"`                     // mongodb, ferretdb1, ferretdb2, documentdb, cosmosdb, unknown
	Version         string `json:"version"`                    // the MongoDB version it reports or emulates
	MaxWireVersion  int    `json:"max_wire_version"`           // from hello
	FerretDBVersion string `json:"ferretdb_version,omitempty"` // FerretDB only
	// Profile is the formulations aio picks for it, by the probe it opens with (a find that
	// matches no document). idem probes with an update that matches none, which this
	// read-only command does not send: its store's Server() reports its own.
	Profile string         `json:"profile"`
	Probes  []server.Probe `json:"probes"`
}

// identifyServer prints what the server is: hello and buildInfo, as the stores ask them, and
// what aio's probe finds on collection executions.
func identifyServer(ctx context.Context, db *mongo.Database, executions string, w io.Writer, o serverOptions) error {
	s, err := connect.DetectServer(ctx, db.Client())
	if err != nil {
		return err
	}
	p, err := connect.ProbeExpressionProjections(ctx, db.Collection(executions))
	if err != nil {
		return err
	}
	return emit(w, o.output, &serverReport{Family: string(s.Family), Version: s.Version,
		MaxWireVersion: s.MaxWireVersion, FerretDBVersion: s.FerretDBVersion,
		Profile: string(connect.Choose(server.Detect, p)), Probes: []server.Probe{p}})
}

func (r *serverReport) writeText(w io.Writer) error {
	return pairs(w, "", append([][2]string{
		{"family", orDash(r.Family)},
		{"version", orDash(r.Version)},
		{"max wire version", strconv.Itoa(r.MaxWireVersion)},
		{"ferretdb version", orDash(r.FerretDBVersion)},
		{"aio profile", orDash(r.Profile)},
	}, r.probeLines()...))
}

// probeLines are the probes, one line each: the feature, then served or the refusal.
func (r *serverReport) probeLines() [][2]string {
	var lines [][2]string
	for _, p := range r.Probes {
		answer := "served"
		if !p.Served {
			answer = "refused: " + p.Refusal
		}
		lines = append(lines, [2]string{string(p.Feature), answer})
	}
	return lines
}
