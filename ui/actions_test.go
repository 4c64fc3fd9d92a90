package ui

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/internal/logtest"
)

// post sends form to path of ts as a POST, with basic authentication when auth is given and
// the headers hd, and returns the response and its body.
func post(t testing.TB, ts *httptest.Server, path string, form url.Values, hd map[string]string, auth ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hd {
		req.Header.Set(k, v)
	}
	return do(t, ts, req, auth...)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// deadRefs are the names of the dead items the UI lists, newest first.
func deadRefs(t *testing.T, ts *httptest.Server, auth ...string) []string {
	t.Helper()
	resp, body := get(t, ts, http.MethodGet, "/dead?format=json", auth...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var sel inspect.DeadSelection
	require.NoError(t, json.Unmarshal([]byte(body), &sel))
	var out []string
	for _, d := range sel.Items {
		out = append(out, d.Ref)
	}
	return out
}

// onlyReads requires that m saw reads only since its last count.
func onlyReads(t *testing.T, m *monitored, what string) {
	t.Helper()
	for name := range m.commands() {
		require.True(t, slices.Contains(readCommands, name), "%s: sent %q, not a read", what, name)
	}
}

// TestActionsOffByDefault: without Options.Actions an action is refused with 405 and sends
// nothing, the pages carry no form that writes, and Actions without a user is refused.
func TestActionsOffByDefault(t *testing.T) {
	ts, m := serve(t, Options{User: "ops", Password: "pw"})
	_, page := get(t, ts, http.MethodGet, "/dead", "ops", "pw")
	require.NotContains(t, page, `method="post"`)
	require.Contains(t, page, "read-only")
	m.commands()
	resp, _ := post(t, ts, "/dead/act", url.Values{"action": {"revive"}, "all": {"1"}, "confirm": {"1"}}, nil, "ops", "pw")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Empty(t, m.commands())
	require.Panics(t, func() { Handler(Options{Database: m.client.Database("x"), Actions: true}) })
}

// TestActions: an action needs basic authentication, the page's CSRF token and a
// same-origin request; it first shows the items for confirmation, writing nothing, then
// acts on exactly those items and shows each outcome; acting again finds them not dead.
// Every outcome is logged with the user.
func TestActions(t *testing.T) {
	var logs logtest.Buffer
	ts, m := serve(t, Options{User: "ops", Password: "pw", Actions: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, page := get(t, ts, http.MethodGet, "/dead", "ops", "pw")
	require.Contains(t, page, "actions on")
	match := csrfField.FindStringSubmatch(page)
	require.NotNil(t, match, "the page carries a CSRF token")
	token := match[1]
	refs := deadRefs(t, ts, "ops", "pw")
	require.Len(t, refs, 2)
	outboxRef, timerRef := refs[0], refs[1]
	onlyReads(t, m, "the pages")

	one := url.Values{"csrf": {token}, "action": {"revive"}, "item": {outboxRef}, "back": {"dead"}}
	for name, c := range map[string]struct {
		form   url.Values
		hd     map[string]string
		auth   []string
		status int
	}{
		"no authentication":   {one, nil, nil, http.StatusUnauthorized},
		"wrong password":      {one, nil, []string{"ops", "nope"}, http.StatusUnauthorized},
		"no token":            {url.Values{"action": {"revive"}, "item": {outboxRef}}, nil, []string{"ops", "pw"}, http.StatusForbidden},
		"another token":       {url.Values{"csrf": {"x" + token}, "action": {"revive"}, "item": {outboxRef}}, nil, []string{"ops", "pw"}, http.StatusForbidden},
		"cross-site":          {one, map[string]string{"Sec-Fetch-Site": "cross-site"}, []string{"ops", "pw"}, http.StatusForbidden},
		"another origin":      {one, map[string]string{"Origin": "https://evil.example"}, []string{"ops", "pw"}, http.StatusForbidden},
		"an opaque origin":    {one, map[string]string{"Origin": "null"}, []string{"ops", "pw"}, http.StatusForbidden},
		"no action":           {url.Values{"csrf": {token}, "item": {outboxRef}}, nil, []string{"ops", "pw"}, http.StatusBadRequest},
		"not an item":         {url.Values{"csrf": {token}, "action": {"revive"}, "item": {"outbox nothing"}}, nil, []string{"ops", "pw"}, http.StatusBadRequest},
		"no item, no filter":  {url.Values{"csrf": {token}, "action": {"revive"}}, nil, []string{"ops", "pw"}, http.StatusBadRequest},
		"a bad filter":        {url.Values{"csrf": {token}, "action": {"revive"}, "kind": {"letter"}}, nil, []string{"ops", "pw"}, http.StatusBadRequest},
		"a bad age":           {url.Values{"csrf": {token}, "action": {"revive"}, "older-than": {"old"}}, nil, []string{"ops", "pw"}, http.StatusBadRequest},
		"confirmed, no token": {url.Values{"action": {"discard"}, "item": {outboxRef}, "confirm": {"1"}}, nil, []string{"ops", "pw"}, http.StatusForbidden},
	} {
		resp, body := post(t, ts, "/dead/act", c.form, c.hd, c.auth...)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", name, body)
	}
	onlyReads(t, m, "refused actions")
	resp, _ := get(t, ts, http.MethodGet, "/dead/act", "ops", "pw")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, refs, deadRefs(t, ts, "ops", "pw"), "nothing written")

	// Confirm first: the items, and nothing written.
	resp, page = post(t, ts, "/dead/act", one, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL}, "ops", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Revive 1 dead item?")
	require.Contains(t, page, `name="confirm" value="1"`)
	require.Contains(t, page, `name="item" value="`+attr(outboxRef)+`"`)
	onlyReads(t, m, "a confirmation")
	require.Equal(t, refs, deadRefs(t, ts, "ops", "pw"))

	confirmed := url.Values{"csrf": {token}, "action": {"revive"}, "item": {outboxRef}, "confirm": {"1"}, "back": {"dead?kind=outbox"}}
	resp, page = post(t, ts, "/dead/act", confirmed, nil, "ops", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Revive: 1 revived")
	require.Contains(t, page, `href="../dead?kind=outbox"`)
	require.Equal(t, []string{timerRef}, deadRefs(t, ts, "ops", "pw"))
	resp, body := post(t, ts, "/dead/act?format=json", confirmed, nil, "ops", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var again struct {
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &again))
	assert.Equal(t, map[string]int{"not dead": 1}, again.Counts, "acting twice is harmless")

	// In bulk, by filter: the confirmation names the items; the confirmed form acts on them.
	resp, page = post(t, ts, "/dead/act", url.Values{"csrf": {token}, "action": {"discard"}, "kind": {"timer"}, "all": {"1"}}, nil, "ops", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Discard 1 dead item?")
	require.Contains(t, page, "dropped for good")
	require.Contains(t, page, attr(timerRef))
	resp, page = post(t, ts, "/dead/act", url.Values{"csrf": {token}, "action": {"discard"}, "item": {timerRef}, "confirm": {"1"}}, nil, "ops", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Discard: 1 discarded")
	require.Empty(t, deadRefs(t, ts, "ops", "pw"))
	sent := m.commands()
	require.Equal(t, 2, sent["update"], "one write per item acted on (a revive of an item not dead reads it and writes nothing): %v", sent)

	log := logs.String()
	require.Contains(t, log, `msg="dead item revive" user=ops action=revive item="`+outboxRef+`" outcome=done from=`)
	require.Contains(t, log, `outcome="not dead"`)
	require.Contains(t, log, `msg="dead item discard" user=ops action=discard item=`+strconv.Quote(timerRef)+` outcome=done`)
	require.Contains(t, log, `msg="ui action refused" user=ops status=403`)
}

// attr is s as html/template writes it in an attribute.
func attr(s string) string { return strings.ReplaceAll(s, `"`, "&#34;") }
