package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/testserver"
)

// readCommands are the commands a read-only client may send: reads, the handshake and
// identification, authentication, and the cleanup of cursors and sessions.
var readCommands = []string{"hello", "isMaster", "ismaster", "buildInfo", "ping", "find", "aggregate", "getMore",
	"count", "listCollections", "listIndexes", "killCursors", "endSessions", "saslStart", "saslContinue"}

// monitored is a client of the test server whose commands are counted by name.
type monitored struct {
	client *mongo.Client
	mu     sync.Mutex
	sent   map[string]int
}

func newMonitored(t testing.TB) *monitored {
	t.Helper()
	m := &monitored{sent: map[string]int{}}
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.sent[e.CommandName]++
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetMonitor(monitor))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	m.client = client
	return m
}

// commands returns the commands counted since the last call, and resets the count.
func (m *monitored) commands() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	sent := m.sent
	m.sent = map[string]int{}
	return sent
}

// routes are every view, with and without its options, and their expected status.
var routes = []struct {
	path   string
	status int
}{
	{"/", 200},
	{"/executions", 200},
	{"/executions?status=RUNNING&status=SUSPENDED&definition=checkout&limit=2", 200},
	{"/executions?parent=order-1", 200},
	{"/executions?roots=1&after=order-1", 200},
	{"/executions?status=NOPE", 400},
	{"/executions?limit=0", 400},
	{"/executions/order-1", 200},
	{"/executions/order-1?body=1&dedupe=1&trace=100", 200},
	{"/executions/ship-1", 200},
	{"/executions/nope", 404},
	{"/outbox", 200},
	{"/outbox?body=1&limit=1", 200},
	{"/timers", 200},
	{"/timers?limit=1", 200},
	{"/dead", 200},
	{"/dead?kind=timer&execution=order-3", 200},
	{"/dead?kind=nope", 400},
	{"/backlog", 200},
	{"/relays", 200},
	{"/relays?lease-key=execstore/relay/timers", 200},
	{"/idem", 200},
	{"/idem?prefix=req-&limit=1", 200},
	{"/idem?key=req-done", 200},
	{"/idem?key=req-done&body=1", 200},
	{"/idem?key=nope", 404},
	{"/journal", 200},
	{"/journal?id=pay-1", 200},
	{"/journal?state=succeeded&owner=worker-a", 200},
	{"/journal?state=stuck", 400},
	{"/journal?id=nope", 404},
	{"/static/style.css", 200},
	{"/static/refresh.js", 200},
	{"/nope", 404},
}

// serve starts the UI over a database fill wrote, read through a monitored client.
func serve(t testing.TB, o Options) (*httptest.Server, *monitored) {
	t.Helper()
	db := testserver.Database(t, "ui")
	fill(t, srv.URI, db)
	m := newMonitored(t)
	o.Database = m.client.Database(db)
	ts := httptest.NewServer(Handler(o))
	t.Cleanup(ts.Close)
	m.commands()
	return ts, m
}

// get requests path of ts with method, and returns the response and its body.
func get(t testing.TB, ts *httptest.Server, method, path string, auth ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, nil)
	require.NoError(t, err)
	return do(t, ts, req, auth...)
}

// do sends req to ts, with basic authentication when auth is a user and a password, and
// returns the response and its body.
func do(t testing.TB, ts *httptest.Server, req *http.Request, auth ...string) (*http.Response, string) {
	t.Helper()
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestRoutesReadOnly requests every route, as HTML, as JSON and with HEAD, and checks each
// answer's status and security headers, that the database saw only reads, and that no page
// shows a header value, a claim token or a sealed plaintext, nor a body unless asked.
func TestRoutesReadOnly(t *testing.T) {
	ts, m := serve(t, Options{Refresh: 5 * time.Second})
	for _, r := range routes {
		for _, format := range []string{"", "json"} {
			path := r.path
			if format != "" && !strings.HasPrefix(path, "/static/") {
				sep := "?"
				if strings.Contains(path, "?") {
					sep = "&"
				}
				path += sep + "format=json"
			}
			resp, body := get(t, ts, http.MethodGet, path)
			require.Equal(t, r.status, resp.StatusCode, "%s: %s", path, body)
			h := resp.Header
			require.Equal(t, contentSecurityPolicy, h.Get("Content-Security-Policy"), path)
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
			require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), path)
			if format == "json" && !strings.HasPrefix(path, "/static/") && path != "/nope?format=json" {
				require.True(t, json.Valid([]byte(body)), "%s: %s", path, body)
				require.Equal(t, "application/json; charset=utf-8", h.Get("Content-Type"), path)
			}
			for _, s := range neverShown {
				require.NotContains(t, body, s, path)
			}
			if !strings.Contains(path, "body=1") {
				for _, s := range bodies {
					require.NotContains(t, body, s, path)
				}
			}
			if !strings.HasPrefix(path, "/static/") && format == "" && r.status == 200 {
				require.Contains(t, body, `<script src="`, path)
				require.NotContains(t, body, "<script>", "no inline script: %s", path)
				require.NotContains(t, body, "style=", "no inline style: %s", path)
			}
		}
		resp, body := get(t, ts, http.MethodHead, r.path)
		require.Equal(t, r.status, resp.StatusCode, "HEAD %s", r.path)
		require.Empty(t, body)
	}
	sent := m.commands()
	require.Positive(t, sent["find"], "%v", sent)
	require.Positive(t, sent["aggregate"], "%v", sent)
	for name := range sent {
		require.True(t, slices.Contains(readCommands, name), "sent %q, not a read (all sent: %v)", name, sent)
	}
}

// TestBodiesOnRequest checks that ?body=1 shows the snapshot, the events and a response's
// body, and still no header value.
func TestBodiesOnRequest(t *testing.T) {
	ts, _ := serve(t, Options{})
	_, page := get(t, ts, http.MethodGet, "/executions/order-1?body=1")
	require.Contains(t, page, "4242-secret")
	require.Contains(t, page, "1 Main St")
	_, page = get(t, ts, http.MethodGet, "/idem?key=req-done&body=1")
	require.Contains(t, page, "&#34;ok&#34;:true")
	require.NotContains(t, page, "hdr-secret-value")
	require.Contains(t, page, "X-Session")
}

// TestMethods checks that every method but GET and HEAD is refused with 405 and Allow,
// before authentication and before any read.
func TestMethods(t *testing.T) {
	ts, m := serve(t, Options{User: "ops", Password: "pw"})
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		for _, path := range []string{"/", "/executions/order-1", "/static/style.css"} {
			resp, _ := get(t, ts, method, path)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, path)
			require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
			require.Equal(t, contentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
		}
	}
	require.Empty(t, m.commands())
}

// TestBasicAuth checks that with a user set, a request without the user and password, or
// with wrong ones, is refused with 401 and a challenge, and reads nothing.
func TestBasicAuth(t *testing.T) {
	ts, m := serve(t, Options{User: "ops", Password: "s3cret"})
	for _, auth := range [][]string{nil, {"ops", "wrong"}, {"other", "s3cret"}, {"", ""}} {
		resp, _ := get(t, ts, http.MethodGet, "/", auth...)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%q", auth)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), `Basic realm="execstore"`)
	}
	require.Empty(t, m.commands())
	resp, body := get(t, ts, http.MethodGet, "/", "ops", "s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, _ = get(t, ts, http.MethodGet, "/static/style.css", "ops", "s3cret")
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestMounted checks that the handler works under a prefix: its links are relative.
func TestMounted(t *testing.T) {
	db := testserver.Database(t, "ui")
	fill(t, srv.URI, db)
	m := newMonitored(t)
	mux := http.NewServeMux()
	mux.Handle("/inspect/", http.StripPrefix("/inspect", Handler(Options{Database: m.client.Database(db)})))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	_, page := get(t, ts, http.MethodGet, "/inspect/executions/order-1")
	require.Contains(t, page, `href="../static/style.css"`)
	require.Contains(t, page, `href="../executions/ship-1"`)
	resp, _ := get(t, ts, http.MethodGet, "/inspect/static/style.css")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, page = get(t, ts, http.MethodGet, "/inspect/")
	require.Contains(t, page, `href="./static/style.css"`)
	require.Contains(t, page, `href="./executions"`)
}
