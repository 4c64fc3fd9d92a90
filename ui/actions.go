package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/deadaction"
	"github.com/execstore/execstore/internal/inspect"
)

// maxActed bounds the items one action of the UI takes: a bulk action takes the newest of
// them, and says how many more the filter selects.
const maxActed = 1000

// maxFormBytes bounds an action's request body.
const maxFormBytes = 1 << 20

// actView is the page of an action: what it will do, or what it did.
var actView = view{name: "act", title: "Dead items"}

// actPage is what an action's page shows: the items it will act on, asking to confirm, or
// the outcome of each.
type actPage struct {
	Action    deadaction.Action
	Confirmed bool
	// Items are the items named (confirm) or the outcomes (done).
	Items []deadaction.ItemResult
	// Matched is how many items the filter selected; more than Items when it selected more
	// than one action takes.
	Matched int
	Counts  map[string]int
	Back    string // the dead items' page it came from
}

func (p *actPage) report() any {
	return map[string]any{"action": p.Action, "confirmed": p.Confirmed, "matched": p.Matched, "items": p.Items, "counts": p.Counts}
}

// Past is the action's past participle, for the page.
func (p *actPage) Past() string {
	if p.Action == deadaction.Revive {
		return "revived"
	}
	return "discarded"
}

// csrfKey is a new random key for the handler's CSRF tokens.
func csrfKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}

// csrfToken is the token the pages of user carry in their forms: an HMAC of the user under
// the handler's key, so a page served to one user is no token for another, and a handler
// started again refuses the forms of the one before.
func (h *handler) csrfToken(user string) string {
	m := hmac.New(sha256.New, h.csrf)
	m.Write([]byte("execstore/ui/csrf\x00" + user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sameOrigin reports whether r came from one of the handler's own pages, as far as the
// browser says: Sec-Fetch-Site same-origin when sent, and an Origin naming r's host when
// sent. The pages' Referrer-Policy (no-referrer) makes a browser send the Origin of their
// forms as "null": that is taken only with Sec-Fetch-Site same-origin.
func sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	switch origin := r.Header.Get("Origin"); origin {
	case "":
		return true
	case "null":
		return site == "same-origin"
	default:
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
}

// serveAct answers POST /dead/act: with the CSRF token of the authenticated user, from the
// handler's own pages, it resolves the items (named with item, or selected by the dead
// items' filters), and shows them asking to confirm; with confirm=1 it acts on exactly
// the items named, and shows each outcome. Every outcome is logged with the user.
func (h *handler) serveAct(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.actError(w, r, http.StatusBadRequest, fmt.Errorf("reading the form: %w", err))
		return
	}
	user, _, _ := r.BasicAuth()
	if !sameOrigin(r) || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(h.csrfToken(user))) {
		h.actError(w, r, http.StatusForbidden, errors.New("refused: the form carries no valid CSRF token of this page's server, or came from another site; reload the page and try again"))
		return
	}
	action, err := deadaction.ParseAction(r.PostForm.Get("action"))
	if err != nil {
		h.actError(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	refs, matched, err := h.actItems(ctx, r.PostForm)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, execstore.ErrInvalid) {
			status = http.StatusBadRequest
		}
		h.actError(w, r, status, err)
		return
	}
	p := &actPage{Action: action, Matched: matched, Back: r.PostForm.Get("back")}
	if p.Back != "dead" && !strings.HasPrefix(p.Back, "dead?") {
		p.Back = "dead" // the dead items' page of this handler, nothing else
	}
	if r.PostForm.Get("confirm") != "1" {
		for _, ref := range refs {
			p.Items = append(p.Items, deadaction.ItemResult{Ref: ref.String()})
		}
		h.respond(w, r, actView, p, nil)
		return
	}
	who := deadaction.Requester{User: user, From: r.RemoteAddr}
	res := deadaction.Apply(ctx, h.executions(), action, refs, who, h.o.Logger)
	p.Confirmed, p.Items, p.Counts = true, res.Items, res.Counts
	h.respond(w, r, actView, p, nil)
}

// actItems are the items an action's form names (item, repeated), or else those the dead
// items' filters in it select (the newest maxActed), and how many were named or selected.
func (h *handler) actItems(ctx context.Context, form url.Values) ([]execstore.ItemRef, int, error) {
	if named := form["item"]; len(named) > 0 {
		if len(named) > maxActed {
			return nil, 0, fmt.Errorf("%w: at most %d items at once, got %d", execstore.ErrInvalid, maxActed, len(named))
		}
		refs := make([]execstore.ItemRef, 0, len(named))
		for _, s := range named {
			ref, err := deadaction.ParseRef(s)
			if err != nil {
				return nil, 0, err
			}
			refs = append(refs, ref)
		}
		return refs, len(refs), nil
	}
	f, err := deadFilterOf(func(k string) string { return strings.TrimSpace(form.Get(k)) }, h.o.Now())
	if err != nil {
		return nil, 0, err
	}
	if f.Empty() && form.Get("all") != "1" {
		return nil, 0, fmt.Errorf("%w: name the items, or a filter, or all=1", execstore.ErrInvalid)
	}
	f.Limit = maxActed
	sel, err := inspect.SelectDead(ctx, h.executions(), f)
	if err != nil {
		return nil, 0, err
	}
	refs := make([]execstore.ItemRef, 0, len(sel.Items))
	for _, d := range sel.Items {
		refs = append(refs, d.ItemRef())
	}
	return refs, sel.Matched, nil
}

// actError answers a refused or failed action.
func (h *handler) actError(w http.ResponseWriter, r *http.Request, status int, err error) {
	user, _, _ := r.BasicAuth()
	h.o.Logger.Warn("ui action refused", "user", user, "status", status, "from", r.RemoteAddr, "error", err)
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = inspect.WriteJSON(w, map[string]string{"error": err.Error()})
		return
	}
	h.render(w, r, actView, status, nil, err)
}
