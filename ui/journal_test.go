package ui

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
)

// The journal page without an id lists the invocations; with a listing's parameter its JSON
// is the list (`execstore journal list -json`), else what the retention deleted, as before.
func TestJournalListed(t *testing.T) {
	ts, _ := serve(t, Options{})
	_, body := get(t, ts, http.MethodGet, "/journal?state=succeeded&format=json")
	var page inspect.InvocationPage
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page.Items, 1, body)
	assert.Equal(t, "pay-1", page.Items[0].ID)
	assert.Equal(t, "succeeded", page.Items[0].Latest)
	_, body = get(t, ts, http.MethodGet, "/journal?state=pending&format=json")
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	assert.Empty(t, page.Items)
	_, body = get(t, ts, http.MethodGet, "/journal?format=json")
	assert.Contains(t, body, `"deleted"`, "the retention's report, as before")
}
