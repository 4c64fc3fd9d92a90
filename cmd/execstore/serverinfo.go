package main

import (
	"context"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// serverOptions are what `server` prints with.
type serverOptions struct {
	output
}

// identifyServer prints what the server is: hello and buildInfo, as the stores ask them, and
// what aio's probe finds on collection executions.
func identifyServer(ctx context.Context, db *mongo.Database, executions string, w io.Writer, o serverOptions) error {
	r, err := inspect.IdentifyServer(ctx, db.Collection(executions))
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeServer)
}

// writeServer writes what the server is for people.
func writeServer(w io.Writer, r *inspect.Server) error {
	return pairs(w, "", append([][2]string{
		{"family", orDash(r.Family)},
		{"version", orDash(r.Version)},
		{"max wire version", strconv.Itoa(r.MaxWireVersion)},
		{"ferretdb version", orDash(r.FerretDBVersion)},
		{"aio profile", orDash(r.Profile)},
	}, probeLines(r)...))
}

// probeLines are the probes, one line each: the feature, then served or the refusal.
func probeLines(r *inspect.Server) [][2]string {
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
