package execstore_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// An item is named as the CLI writes it, in text and in log lines of either handler.
func TestItemRefString(t *testing.T) {
	fire := time.Date(2026, 12, 5, 11, 0, 0, 250_000_000, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		ref  execstore.ItemRef
		want string
	}{
		{execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "pay-t3", Seq: 7}, "outbox pay-t3/7"},
		{execstore.ItemRef{Kind: execstore.SpawnItem, ExecutionID: "order-9", Seq: 2}, "spawn order-9/2"},
		{execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: "pay-t3", Path: "remind me", FireAt: fire},
			`timer pay-t3 "remind me" at 2026-12-05T10:00:00.25Z`},
		{execstore.ItemRef{Kind: "other", ExecutionID: "x", Seq: 1}, `"other" x/1 "" at 0001-01-01T00:00:00Z`},
	} {
		assert.Equal(t, c.want, c.ref.String())

		var text, js bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("m", "item", c.ref)
		assert.Contains(t, text.String(), "item="+quoteIfNeeded(c.want))
		slog.New(slog.NewJSONHandler(&js, nil)).Info("m", "item", c.ref)
		var line map[string]any
		require.NoError(t, json.Unmarshal(js.Bytes(), &line))
		assert.Equal(t, c.want, line["item"])
	}
}

// quoteIfNeeded is s as slog's text handler writes a value: quoted when it has a space or a
// quote.
func quoteIfNeeded(s string) string {
	if strings.ContainsAny(s, ` "=`) {
		return strconv.Quote(s)
	}
	return s
}
