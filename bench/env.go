package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/internal/connect"
)

// environment is what every run of a benchmark shares: the server, the proxy in front of it
// and a client of the harness's own.
type environment struct {
	embedded *embedded.Server // nil when -uri names the server
	uri      string           // the server's own URI
	// clientURIs is what the measured clients connect to at each -rtt: the server's own URI
	// at 0, a latency proxy's above.
	clientURIs map[time.Duration]string
	// clientURI is the first -rtt's: the idempotency and journal workloads run there.
	clientURI string
	proxies   []*latencyProxy // one per -rtt above 0
	admin     *mongo.Client   // straight to the server, never counted: drops databases
	info      connect.Server
	// drops are the runs' databases close drops, once every run is measured.
	drops []string

	description string // the server, without credentials
}

// startEnvironment starts the embedded server unless cfg names one, connects the harness's
// own client, detects the server and starts a latency proxy for each -rtt above 0. When nothing of
// cfg uses a server (memory alone, no idempotency, journal or delivery workload) it starts nothing. On
// error nothing is left running.
func startEnvironment(ctx context.Context, cfg config) (_ *environment, err error) {
	if !cfg.scaling && !slices.ContainsFunc(cfg.variants, usesServer) && len(cfg.idemDesigns) == 0 &&
		len(cfg.journalDesigns) == 0 && cfg.deliveryEntries == 0 && cfg.chains == 0 {
		return &environment{description: "no server (memstore only)"}, nil
	}
	e := &environment{uri: cfg.uri}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	if e.uri == "" {
		fmt.Fprintln(os.Stderr, "bench: starting the embedded server")
		if e.embedded, err = embedded.Start(ctx, embedded.Options{}); err != nil {
			return nil, err
		}
		e.uri = e.embedded.URI()
	}
	if e.admin, err = mongo.Connect(options.Client().ApplyURI(e.uri)); err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", hostsOf(e.uri), err)
	}
	if e.info, err = connect.DetectServer(ctx, e.admin); err != nil {
		return nil, err
	}
	e.description = e.describe()
	e.clientURIs = make(map[time.Duration]string, len(cfg.rtts))
	for _, rtt := range cfg.rtts {
		if rtt == 0 {
			e.clientURIs[rtt] = e.uri
			continue
		}
		p, uri, err := proxied(e.uri, rtt)
		if err != nil {
			return nil, err
		}
		e.proxies = append(e.proxies, p)
		e.clientURIs[rtt] = uri
	}
	e.clientURI = e.clientURIs[cfg.rtts[0]]
	return e, nil
}

func (e *environment) close() error {
	ctx, cancel := cleanupContext(context.Background())
	defer cancel()
	var err error
	for _, p := range e.proxies {
		p.close()
	}
	if e.admin != nil {
		for _, name := range e.drops {
			err = errors.Join(err, e.dropDatabase(ctx, name))
		}
		err = errors.Join(err, e.admin.Disconnect(ctx))
	}
	if e.embedded != nil {
		err = errors.Join(err, e.embedded.Close())
	}
	return err
}

// dropAtEnd has close drop the databases of the run named db: its own, and those its stores
// name after it (the relays' leases, the board's wake records), whether or not the run made
// them. They are dropped once every run is measured, not between runs: on FerretDB 2.5 /
// DocumentDB a drop makes every backend connection reset its caches when it next runs, and
// until all have, statements read the extension's version again over new connections to their
// own server, which under CPU contention stalls commands for up to seconds. A drop between
// runs would land on the next run alone (docs/performance.md, "On a busy machine").
func (e *environment) dropAtEnd(db string) {
	e.drops = append(e.drops, db, db+"_leases", db+"_wakes")
}

// dropDatabase drops a run's database over the harness's own client, so its commands are not
// counted as the variant's.
func (e *environment) dropDatabase(ctx context.Context, name string) error {
	if err := e.admin.Database(name).Drop(ctx); err != nil {
		return fmt.Errorf("dropping database %q: %w", name, err)
	}
	return nil
}

// describe names the server without credentials.
func (e *environment) describe() string {
	if e.embedded != nil {
		version := e.info.FerretDBVersion
		if v := linkedFerretDB(); v != "" {
			version = v
		}
		return fmt.Sprintf("embedded %s (in-process, SQLite, write-serializing front)", ferretDB(version))
	}
	return fmt.Sprintf("%s (%s)", hostsOf(e.uri), serverName(e.info.ServerInfo))
}

// serverName names a detected server by its family, with the versions it reports: FerretDB's
// own release first, then the MongoDB version it emulates.
func serverName(info connect.ServerInfo) string {
	mongoDB := "MongoDB " + info.Version
	if info.Version == "" { // buildInfo refused (a strict Stable API client)
		mongoDB = fmt.Sprintf("MongoDB, wire version %d", info.MaxWireVersion)
	}
	switch info.Family {
	case connect.FamilyMongoDB:
		return mongoDB
	case connect.FamilyFerretDB1:
		return ferretDB(info.FerretDBVersion)
	case connect.FamilyFerretDB2:
		return fmt.Sprintf("%s on DocumentDB, as %s", ferretDB(info.FerretDBVersion), mongoDB)
	case connect.FamilyDocumentDB:
		return "DocumentDB, as " + mongoDB
	case connect.FamilyCosmosDB:
		return "Azure Cosmos DB (RU), as " + mongoDB
	}
	return "unknown server, as " + mongoDB
}

// hostsOf returns the hosts a URI names, without credentials.
func hostsOf(uri string) string {
	cs, err := connstring.Parse(uri)
	if err != nil || len(cs.Hosts) == 0 {
		return "(unparsable URI)"
	}
	return strings.Join(cs.Hosts, ",")
}

// ferretDB names FerretDB with the version it reports, when it reports one: "FerretDB 1.24.2",
// "FerretDB 2.5.0" (FerretDB 2.x reports "v2.5.0").
func ferretDB(version string) string {
	if version == "" || version == "unknown" {
		return "FerretDB"
	}
	return "FerretDB " + strings.TrimPrefix(version, "v")
}

// linkedFerretDB returns the version of the FerretDB module built into this binary, which
// the embedded server reports only as "unknown"; "" when it cannot be told.
func linkedFerretDB() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/FerretDB/FerretDB" {
			return strings.TrimPrefix(m.Version, "v")
		}
	}
	return ""
}

// tearDown ends a run: closes its client with closeRun (nil: nothing to close) and, unless
// -keep, has close drop its databases (dropAtEnd); closeRun runs on a context that outlives
// ctx's cancellation.
func (e *environment) tearDown(ctx context.Context, cfg config, database string, closeRun func(context.Context) error) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	var err error
	if closeRun != nil {
		err = closeRun(cctx)
	}
	if !cfg.keep {
		e.dropAtEnd(database)
	}
	return err
}
