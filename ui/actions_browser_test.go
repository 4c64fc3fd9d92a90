package ui

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserActions revives a dead item as a person does in headless Chromium, with basic
// authentication: the button on its row, the confirmation page, its button, the outcome;
// then discards a group. It saves a screenshot of each page, and checks that no script
// failed and nothing was refused.
func TestBrowserActions(t *testing.T) {
	ts, m := serve(t, Options{User: "ops", Password: "pw", Actions: true})
	ctx, problems := openBrowser(t)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:pw"))
	require.NoError(t, chromedp.Run(ctx, network.Enable(),
		network.SetExtraHTTPHeaders(network.Headers{"Authorization": auth})))
	require.NoError(t, os.MkdirAll(screenshots, 0o755))

	// shot checks the page shows want, and saves its screenshot unless name starts with "-".
	shot := func(name string, want ...string) {
		t.Helper()
		var text string
		var png []byte
		require.NoError(t, chromedp.Run(ctx,
			chromedp.WaitVisible("main", chromedp.ByQuery),
			chromedp.Text("body", &text, chromedp.ByQuery),
			chromedp.CaptureScreenshot(&png),
		), name)
		for _, w := range want {
			require.Contains(t, text, w, "%s shows %q", name, w)
		}
		if !strings.HasPrefix(name, "-") {
			require.NoError(t, os.WriteFile(filepath.Join(screenshots, name+".png"), png, 0o644))
		}
		require.Empty(t, problems.take(), name)
	}

	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(ts.URL+"/dead")))
	shot("dead-actions", "actions on", "Revive all 2…", "Discard all 2…", "Revive this group (1)…", "audit service: 503 Service Unavailable")

	// One item: its row's Revive, then the confirmation's button.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`section.dead-group form.row button[value="revive"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery)))
	shot("act-confirm", "Revive 1 dead item?", "outbox order-1/2", "cancel")
	for name := range m.commands() {
		require.Contains(t, readCommands, name, "the confirmation sent %q, not a read", name)
	}
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`form.confirm button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.badge.o-done`, chromedp.ByQuery)))
	shot("act-result", "Revive: 1 revived", "outbox order-1/2", "done", "back to the dead items")
	require.Equal(t, 1, m.commands()["update"])

	// A group, discarded: back to the list, the group's Discard, the confirmation.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`a[href="../dead"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.actions`, chromedp.ByQuery),
		chromedp.Click(`section.dead-group > form.actions button[value="discard"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery)))
	shot("act-confirm-discard", "Discard 1 dead item?", "dropped for good", "Retry.Charge")
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`form.confirm button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.badge.o-done`, chromedp.ByQuery)))
	shot("-act-result-discard", "Discard: 1 discarded")
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(ts.URL+"/dead")))
	shot("-dead-none", "No dead items")
}
