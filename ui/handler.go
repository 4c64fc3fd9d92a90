package ui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// Options configure Handler. Only Database is required.
type Options struct {
	// Database is the store's database. Handler reads it and never writes to it.
	Database *mongo.Database
	// Executions is the executions collection. Default "executions".
	Executions string
	// Idempotency is the idem store's collection, for idempotency records. Default
	// "idempotency".
	Idempotency string
	// Leases is the collection of the relays' leases (an idem store's) in Database. Default
	// "": the relays' leases are looked for where relays keep them (LeaseStores).
	Leases string
	// LeaseStores are the collections the relays' leases are looked for in, in order: the
	// first that holds a record under the lease key is shown, and the page names it. Default:
	// Leases in Database when it is set, else Idempotency in Database, then in the database
	// named after it with "_leases" appended, then Executions there (aio.Store.LeaseStore's):
	// inspect.LeaseStores.
	LeaseStores []*mongo.Collection
	// LeaseKey is the relays' Options.LeaseKey. Default the relays' default.
	LeaseKey string
	// SweeperLeaseKey is the sweepers' Options.LeaseKey: the relays page shows their leases
	// beside the relays'. Default the sweepers' default.
	SweeperLeaseKey string
	// Journal is the journal's collection. Default "journal".
	Journal string
	// User and Password turn on basic authentication when User is not empty: every request
	// must carry them. Default off.
	User, Password string
	// Actions turns on the dead items' actions, revive and discard, one item or in bulk: the
	// only requests that write. Each is a POST from the handler's own pages, with basic
	// authentication (User must be set: Handler panics otherwise) and the page's CSRF token,
	// shown for confirmation before it acts, and logged with the user (Logger). Default
	// off: the handler answers GET and HEAD only, and sends the server only reads.
	Actions bool
	// Logger takes a line for every action's outcome on each item, and for every action
	// refused. Default slog.Default().
	Logger *slog.Logger
	// Refresh is how often the pages refresh themselves while open (with a pause toggle);
	// 0 or less turns it off. Default 0; the command execstore ui sets 10s.
	Refresh time.Duration
	// Timeout bounds the reads of one request. Default 10s.
	Timeout time.Duration
	// Now is the clock timers are due by. Default time.Now.
	Now func() time.Time
}

// handler serves the views.
type handler struct {
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	csrf  []byte // the key of the pages' CSRF tokens (csrfToken)
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy lets a page load scripts, styles and images from the handler only,
// run no inline script or style, submit forms only to the handler, and be framed by no one.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler returns the UI over o.Database, to mount anywhere: its links are relative, so
// http.StripPrefix("/inspect", ui.Handler(o)) serves it under /inspect/. It panics when
// o.Database is nil, or o.Actions is set without o.User.
func Handler(o Options) http.Handler {
	if o.Database == nil {
		panic("ui: Options.Database is nil")
	}
	if o.Actions && o.User == "" {
		panic("ui: Options.Actions needs basic authentication: Options.User is empty")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Executions == "" {
		o.Executions = ops.ExecutionsCollection
	}
	if o.Idempotency == "" {
		o.Idempotency = "idempotency"
	}
	if len(o.LeaseStores) == 0 {
		if o.Leases != "" {
			o.LeaseStores = []*mongo.Collection{o.Database.Collection(o.Leases)}
		} else {
			o.LeaseStores = inspect.LeaseStores(o.Database, o.Idempotency, o.Executions)
		}
	}
	if o.LeaseKey == "" {
		o.LeaseKey = inspect.RelayLeaseKey
	}
	if o.SweeperLeaseKey == "" {
		o.SweeperLeaseKey = inspect.SweeperLeaseKey
	}
	if o.Journal == "" {
		o.Journal = "journal"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &handler{o: o, pages: parsePages(), mux: http.NewServeMux(), csrf: csrfKey()}
	static, _ := fs.Sub(staticFiles, "static")
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	for _, v := range views {
		h.mux.HandleFunc("GET "+v.pattern, h.serve(v))
	}
	if o.Actions {
		h.mux.HandleFunc("POST /dead/act", h.serveAct)
	}
	return h
}

// ServeHTTP answers GET and HEAD, and with Options.Actions a POST of an action (405 with
// Allow otherwise), after basic authentication when it is on, with the security headers on
// every answer.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !(h.o.Actions && r.Method == http.MethodPost && r.URL.Path == "/dead/act") {
		if h.o.Actions && r.URL.Path == "/dead/act" {
			hd.Set("Allow", "POST")
			http.Error(w, "an action: POST only", http.StatusMethodNotAllowed)
			return
		}
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	if h.o.User != "" && !h.authorized(r) {
		hd.Set("WWW-Authenticate", `Basic realm="execstore", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// authorized reports whether r carries the user and password, compared in constant time.
func (h *handler) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	eq := func(a, b string) bool {
		x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
		return subtle.ConstantTimeCompare(x[:], y[:]) == 1
	}
	return eq(user, h.o.User) && eq(pass, h.o.Password)
}

// serve answers view v: its data as HTML, or as JSON with ?format=json.
func (h *handler) serve(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
		defer cancel()
		q := request{Request: r, now: h.o.Now().UTC()}
		data, err := v.read(ctx, h, q)
		h.respond(w, r, v, data, err)
	}
}

// respond answers with view v's data, or its error: as HTML, or as JSON with ?format=json.
func (h *handler) respond(w http.ResponseWriter, r *http.Request, v view, data any, err error) {
	status := http.StatusOK
	var nf *inspect.NotFoundError
	var bad *badRequest
	switch {
	case errors.As(err, &nf):
		status = http.StatusNotFound
	case errors.As(err, &bad), errors.Is(err, execstore.ErrInvalid):
		status = http.StatusBadRequest
	case err != nil:
		status = http.StatusInternalServerError
	}
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if err != nil {
			w.WriteHeader(status)
			_ = inspect.WriteJSON(w, map[string]string{"error": err.Error()})
			return
		}
		_ = inspect.WriteJSON(w, jsonOf(data))
		return
	}
	h.render(w, r, v, status, data, err)
}

// badRequest is a query the view cannot read: a bad status, limit or cursor.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// request is one request to a view: its query, and the now it is judged at.
type request struct {
	*http.Request
	now time.Time
}

// param is the query parameter name, trimmed.
func (r request) param(name string) string { return strings.TrimSpace(r.URL.Query().Get(name)) }

// flag reports whether the query parameter name is set to 1 (or true).
func (r request) flag(name string) bool {
	v := r.param(name)
	return v == "1" || v == "true"
}
