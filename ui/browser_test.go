package ui

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// screenshots is where TestBrowser saves each view's screenshot, which docs/ui.md shows.
const screenshots = "../docs/ui"

// browserViews are the views a person opens, what each must show, and the screenshot's
// name.
var browserViews = []struct {
	name, path string
	want       []string
}{
	{"overview", "/", []string{"Overview", "executions", "pending outbox entries", "due timers", "dead items",
		"worst timer lag", "Executions by status", "RUNNING", "relay-eu-1", "nobody", "Backlog per partition", "total",
		"The last hour", "2 relays and sweepers recorded it", "Handled per minute", "Oldest wait"}},
	{"executions", "/executions", []string{"Executions", "order-1", "ship-1", "checkout", "shipping", "RUNNING", "DONE", "last page"}},
	{"execution", "/executions/order-1", []string{"Execution order-1", "RUNNING", "Outbox", "2 pending", "ship-1", "billing",
		"Paid.Reminder", "due", "Spawns", "Fork.Ship", "Dead items", "audit service: 503 Service Unavailable", "Children", "ship-2", "not acked yet", "Committed",
		"Trace", "awaiting-shipment", "show bodies"}},
	{"execution-child", "/executions/ship-1", []string{"Execution ship-1", "order-1", "Pickup.Deadline", "awaiting-pickup", "none found"}},
	{"outbox", "/outbox", []string{"Outbox", "pending in 1 execution", "order-1", "ship-1", "billing", "show bodies"}},
	{"timers", "/timers", []string{"Timers", "1 due", "Paid.Reminder", "Pickup.Deadline", "Paid.Expiry", "ago"}},
	{"dead", "/dead", []string{"Dead items", "outbox", "timer", "audit service: 503 Service Unavailable", "payment gateway: card declined", "Retry.Charge"}},
	{"backlog", "/backlog", []string{"Backlog", "total", "Retention deleted", "1 DONE"}},
	{"relays", "/relays", []string{"Relays", "relay-eu-1", "live", "nobody", "never shown", "Sweepers", "sweeper-eu-1", "4 of 4"}},
	{"idem", "/idem?key=req-done", []string{"Idempotency", "req-done", "COMPLETED", "fp-done", "201", "Content-Type", "X-Session",
		"values never shown", "show body"}},
	{"idem-list", "/idem?prefix=req-", []string{"req-claimed", "req-done", "CLAIMED", "COMPLETED", "last page"}},
	{"journal-retention", "/journal", []string{"Journal", "Invocations", "pay-1", "worker-a", "succeeded", "Retention deleted", "1", "finished invocations", "journal"}},
	{"journal", "/journal?id=pay-1", []string{"Invocation pay-1", "shop/payments", "worker-a", "sealed", "never opened"}},
}

// TestBrowser opens every view in headless Chromium, checks what a person sees on it and
// that no script fails, no console error is logged and nothing is refused (a CSP violation
// is logged as an error), and saves a screenshot of each (1280×800).
func TestBrowser(t *testing.T) {
	ts, m := serve(t, Options{Refresh: time.Second})
	ctx, problems := openBrowser(t)
	require.NoError(t, os.MkdirAll(screenshots, 0o755))

	for _, v := range browserViews {
		var text string
		var png []byte
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Navigate(ts.URL+v.path),
			chromedp.WaitVisible("main", chromedp.ByQuery),
			chromedp.Text("body", &text, chromedp.ByQuery),
			chromedp.CaptureScreenshot(&png),
		), v.name)
		for _, w := range v.want {
			require.Contains(t, text, w, "%s shows %q", v.name, w)
		}
		for _, s := range append(neverShown, bodies...) {
			require.NotContains(t, text, s, v.name)
		}
		require.NoError(t, os.WriteFile(filepath.Join(screenshots, v.name+".png"), png, 0o644))
		require.Empty(t, problems.take(), v.name)
	}

	// Live refresh: the overview swaps in its new content; then the pause button stops it.
	var label string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible("#refresh-toggle", chromedp.ByQuery),
		chromedp.Sleep(2500*time.Millisecond),
		chromedp.Click("#refresh-toggle", chromedp.ByQuery),
		chromedp.Text("#refresh-toggle", &label, chromedp.ByQuery),
	))
	require.Equal(t, "resume live refresh", label)

	// A filter form submits as a GET to the same page.
	var text string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(ts.URL+"/executions"),
		chromedp.SetValue(`input[name="definition"]`, "shipping", chromedp.ByQuery),
		chromedp.Submit(`form.filters`, chromedp.ByQuery),
		chromedp.WaitVisible(`input[name="definition"][value="shipping"]`, chromedp.ByQuery),
		chromedp.Text("main", &text, chromedp.ByQuery),
	))
	require.Contains(t, text, "ship-1")
	require.NotContains(t, text, "order-2")
	require.Empty(t, problems.take())

	for name := range m.commands() {
		require.Contains(t, readCommands, name, "sent %q, not a read", name)
	}
}

// problemLog collects what a page must not do: scripts failing, console errors, errors
// logged (a CSP violation is one).
type problemLog struct {
	mu   sync.Mutex
	seen []string
}

// take returns the problems seen since the last call.
func (p *problemLog) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.seen
	p.seen = nil
	return seen
}

// openBrowser starts headless Chromium (1280×800) for t, with what its pages do wrong
// collected in the problemLog.
func openBrowser(t *testing.T) (context.Context, *problemLog) {
	t.Helper()
	chromium, err := findChromium()
	require.NoError(t, err, "the browser tests need Chromium: apt-get install -y chromium (Debian's package)")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	// This chromedp release cannot decode a few newer network events; they concern no page.
	quiet := chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "IPAddressSpace") {
			t.Logf("chromedp: %s", msg)
		}
	})
	ctx, cancel := chromedp.NewContext(actx, quiet)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)

	problems := &problemLog{}
	chromedp.ListenTarget(ctx, func(ev any) {
		problems.mu.Lock()
		defer problems.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems.seen = append(problems.seen, "exception: "+ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				problems.seen = append(problems.seen, "console "+string(ev.Type)+": "+argsText(ev.Args))
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				problems.seen = append(problems.seen, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	})
	require.NoError(t, chromedp.Run(ctx, cdplog.Enable(), runtime.Enable(),
		chromedp.EmulateViewport(1280, 800)))
	return ctx, problems
}

// argsText is a console call's arguments as text.
func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if len(a.Value) > 0 {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

// findChromium is the headless browser's path: Debian's chromium, or the names other
// systems give a Chromium-based browser.
func findChromium() (string, error) {
	var err error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		var path string
		if path, err = exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", err
}
