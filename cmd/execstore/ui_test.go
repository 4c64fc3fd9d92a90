package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/ui"
)

// TestUIJSONMatchesCLI checks that each page of package ui, as ?format=json, is what the
// command prints with -json for the same object and the same now.
func TestUIJSONMatchesCLI(t *testing.T) {
	f := populate(t)
	db := testserver.Collection(t, srv.URI, f.db, "executions").Database()
	ts := httptest.NewServer(ui.Handler(ui.Options{Database: db, Now: func() time.Time { return testNow }}))
	defer ts.Close()
	for _, c := range []struct {
		path string
		args []string
	}{
		{"/executions/order-1?body=1", []string{"show", "order-1", "-json"}},
		{"/executions/order-1?body=1&dedupe=1&trace=1", []string{"show", "order-1", "-json", "-dedupe", "-trace", "1"}},
		{"/executions?status=RUNNING&limit=1", []string{"list", "-status", "RUNNING", "-limit", "1", "-json"}},
		{"/outbox?body=1", []string{"outbox", "-json"}},
		{"/timers", []string{"timers", "-json"}},
		{"/dead?body=1", []string{"dead", "-json"}},
		{"/backlog", []string{"backlog", "-json"}},
		{"/journal?id=pay-1", []string{"journal", "show", "pay-1", "-json"}},
		{"/journal", []string{"journal", "retention", "-json"}},
	} {
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		resp, err := http.Get(ts.URL + c.path + sep + "format=json")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.path, body)
		cli := f.inspect(t, c.args...)
		require.True(t, json.Valid(body), c.path)
		require.Equal(t, cli, string(body), c.path)
	}
}
