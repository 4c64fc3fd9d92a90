package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore/embedded"
)

// connection is where the command reads: a server at URI, or the embedded server started on
// a data directory.
type connection struct {
	URI         string        // a MongoDB URI; "" with EmbeddedDir
	EmbeddedDir string        // the embedded server's data directory; "" with URI
	Timeout     time.Duration // for messages: the caller's context carries the deadline
	// ClientOptions are applied after the URI (the tests set a command monitor). Default nil.
	ClientOptions *options.ClientOptions
}

// session is an open connection: a client that has answered a ping.
type session struct {
	client   *mongo.Client
	embedded *embedded.Server // nil unless started here
}

// appName names the command's connections in the server's logs.
const appName = "execstore-inspect"

// openSession connects as c says and pings the server, within ctx. Errors name the server's
// address, never the URI's credentials.
func openSession(ctx context.Context, c connection) (*session, error) {
	s := &session{}
	uri, addr := c.URI, hostsOf(c.URI)
	if c.EmbeddedDir != "" {
		if fi, err := os.Stat(c.EmbeddedDir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("-embedded %s: no such data directory", c.EmbeddedDir)
		}
		srv, err := embedded.Start(ctx, embedded.Options{Dir: c.EmbeddedDir})
		if err != nil {
			return nil, fmt.Errorf("starting the embedded server on %s: %w", c.EmbeddedDir, err)
		}
		s.embedded = srv
		uri, addr = srv.URI(), "the embedded server on "+c.EmbeddedDir
	}
	if _, err := connstring.ParseAndValidate(uri); err != nil {
		return nil, errors.Join(fmt.Errorf("bad URI for %s: %s", addr, redact(err.Error(), uri)), s.close())
	}
	opts := options.Client().ApplyURI(uri).SetAppName(appName)
	if c.ClientOptions != nil {
		opts = options.MergeClientOptions(opts, c.ClientOptions)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bad URI for %s: %s", addr, redact(err.Error(), uri)), s.close())
	}
	s.client = client
	if err := client.Ping(ctx, nil); err != nil {
		return nil, errors.Join(fmt.Errorf("server at %s not reachable within %v: %s", addr, c.Timeout, redact(err.Error(), uri)), s.close())
	}
	return s, nil
}

// close disconnects and stops the embedded server, if any.
func (s *session) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if s.client != nil {
		errs = append(errs, s.client.Disconnect(ctx))
	}
	if s.embedded != nil {
		errs = append(errs, s.embedded.Close())
	}
	return errors.Join(errs...)
}

// hostsOf returns the hosts a URI names, without its credentials, whether or not it parses:
// what follows the scheme up to the path or the options, after the last "@".
func hostsOf(uri string) string {
	rest := uri
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		return "(no host)"
	}
	return rest
}

// redact removes from msg what of uri may be secret: the URI itself, its user information
// (raw and unescaped: the password, and the user name unless it is shorter than four
// bytes), and the values of options that hold secrets.
func redact(msg, uri string) string {
	secrets := []string{uri}
	rest := uri
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		info := rest[:i]
		secrets = append(secrets, info)
		user, pass, _ := strings.Cut(info, ":")
		parts := []string{pass}
		if len(user) >= 4 { // a shorter name would blot out unrelated text
			parts = append(parts, user)
		}
		for _, s := range parts {
			secrets = append(secrets, s)
			if u, err := url.PathUnescape(s); err == nil {
				secrets = append(secrets, u)
			}
		}
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		k = strings.ToLower(k)
		if strings.Contains(k, "password") || strings.Contains(k, "authmechanismproperties") ||
			strings.Contains(k, "token") || strings.Contains(k, "secret") {
			secrets = append(secrets, v)
			if u, err := url.QueryUnescape(v); err == nil {
				secrets = append(secrets, u)
			}
		}
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
