package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	Actions    bool // revive and discard dead items (ui.Options.Actions)
}

// checkUIAuth checks the basic authentication the environment sets: a password needs a
// user, and actions need both.
func checkUIAuth(getenv func(string) string, actions bool) error {
	user, password := getenv(uiUserVariable), getenv(uiPasswordVariable)
	if user == "" && password != "" {
		return usagef("%s is set without %s", uiPasswordVariable, uiUserVariable)
	}
	if actions && (user == "" || password == "") {
		return usagef("-actions needs basic authentication: set %s and %s", uiUserVariable, uiPasswordVariable)
	}
	return nil
}

// serveUI serves package ui's handler on o.Listen until ctx ends, then shuts down within
// five seconds. It prints the address it listens on.
func serveUI(ctx context.Context, db *mongo.Database, w io.Writer, o uiOptions) error {
	user, password := o.getenv(uiUserVariable), o.getenv(uiPasswordVariable)
	if err := checkUIAuth(o.getenv, o.Actions); err != nil {
		return err
	}
	h := ui.Handler(ui.Options{Database: db, Executions: o.Collection, LeaseKey: o.LeaseKey,
		User: user, Password: password, Refresh: o.Refresh, Timeout: o.timeout, Now: o.clock, Actions: o.Actions,
		Logger: slog.New(slog.NewTextHandler(o.stderr, nil))})
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", o.Listen, err)
	}
	auth := "no authentication"
	if user != "" {
		auth = "basic authentication as " + plain(user)
	}
	mode := "read-only"
	if o.Actions {
		mode = "actions on: revive and discard dead items, logged on standard error"
	}
	fmt.Fprintf(w, "serving http://%s/ (%s, %s); interrupt to stop\n", ln.Addr(), mode, auth)
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
