package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ui"
)

// The environment variables that turn on the UI's basic authentication.
const (
	uiUserVariable     = "EXECSTORE_UI_USER"
	uiPasswordVariable = "EXECSTORE_UI_PASSWORD"
)

// uiOptions are what `ui` serves.
type uiOptions struct {
	output
	Collection string // the executions collection
	Listen     string
	LeaseKey   string
	Refresh    time.Duration
}

// serveUI serves package ui's handler on o.Listen until ctx ends, then shuts down within
// five seconds. It prints the address it listens on.
func serveUI(ctx context.Context, db *mongo.Database, w io.Writer, o uiOptions) error {
	user, password := o.getenv(uiUserVariable), o.getenv(uiPasswordVariable)
	if user == "" && password != "" {
		return usagef("%s is set without %s", uiPasswordVariable, uiUserVariable)
	}
	h := ui.Handler(ui.Options{Database: db, Executions: o.Collection, LeaseKey: o.LeaseKey,
		User: user, Password: password, Refresh: o.Refresh, Timeout: o.timeout, Now: o.clock})
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", o.Listen, err)
	}
	auth := "no authentication"
	if user != "" {
		auth = "basic authentication as " + plain(user)
	}
	fmt.Fprintf(w, "serving http://%s/ (read-only, %s); interrupt to stop\n", ln.Addr(), auth)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
