package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/server"
)

// countingHandler answers 201 with headers and a body echoing the request, and counts its
// runs; status and pause change what it does.
type countingHandler struct {
	runs   atomic.Int64
	status atomic.Int64
	pause  time.Duration
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.runs.Add(1)
	time.Sleep(h.pause)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Add("X-Run", "run")
	w.Header().Add("X-Run", string(rune('0'+n)))
	status := int(h.status.Load())
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte("got "), body...))
}

func serve(t *testing.T, s *Store, opts MiddlewareOptions, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(s.Middleware(opts)(h))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set(HeaderKey, key)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// A retry gets the original status, headers and body, marked as a replay; the handler ran once.
func TestMiddlewareReplay(t *testing.T) {
	s := openStore(t, Options{})
	h := &countingHandler{}
	srv := serve(t, s, MiddlewareOptions{}, h)
	first, body1 := post(t, srv, `"key-1"`, "order")
	second, body2 := post(t, srv, `"key-1"`, "order")
	assert.Equal(t, http.StatusCreated, first.StatusCode)
	assert.Equal(t, http.StatusCreated, second.StatusCode)
	assert.Equal(t, "got order", body1)
	assert.Equal(t, body1, body2)
	assert.Equal(t, []string{"run", "1"}, second.Header.Values("X-Run"))
	assert.Equal(t, "text/plain", second.Header.Get("Content-Type"))
	assert.Empty(t, first.Header.Get(HeaderReplayed))
	assert.Equal(t, "true", second.Header.Get(HeaderReplayed))
	assert.Equal(t, int64(1), h.runs.Load())
}

// Ten concurrent identical requests run the handler once, and all get its response.
func TestMiddlewareConcurrentRunsOnce(t *testing.T) {
	s := openStore(t, Options{WaitTimeout: time.Minute})
	h := &countingHandler{pause: 100 * time.Millisecond}
	srv := serve(t, s, MiddlewareOptions{}, h)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			resp, body := post(t, srv, "k", "same")
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, "got same", body)
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), h.runs.Load())
}

// A retry while the first request runs waits for it up to WaitTimeout, then gets 409 with
// Retry-After.
func TestMiddlewareInProgress(t *testing.T) {
	s := openStore(t, Options{WaitTimeout: 100 * time.Millisecond})
	release := make(chan struct{})
	started := make(chan struct{})
	srv := serve(t, s, MiddlewareOptions{RetryAfter: 2 * time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	done := make(chan int)
	go func() {
		resp, _ := post(t, srv, "k", "x")
		done <- resp.StatusCode
	}()
	<-started
	resp, _ := post(t, srv, "k", "x")
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	close(release)
	assert.Equal(t, http.StatusOK, <-done)
	resp, _ = post(t, srv, "k", "x")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(HeaderReplayed))
}

// A key reused with a different request is a 422; a missing key is a 400 where required
// and passes through otherwise; a malformed key is a 400; a large body is a 413.
func TestMiddlewareRefusals(t *testing.T) {
	s := openStore(t, Options{})
	h := &countingHandler{}
	srv := serve(t, s, MiddlewareOptions{MaxRequestBytes: 10}, h)
	required := serve(t, s, MiddlewareOptions{Required: true}, h)
	resp, _ := post(t, srv, "k", "first")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = post(t, srv, "k", "second")
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, _ = post(t, required, "", "x")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	runs := h.runs.Load()
	resp, _ = post(t, srv, "", "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, runs+1, h.runs.Load(), "no key, not required: the handler runs")
	resp, _ = post(t, srv, `"unterminated`, "x")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = post(t, srv, "big", "more than ten bytes")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// A 5xx is sent but not stored: the retry runs the handler again.
func TestMiddlewareServerErrorNotStored(t *testing.T) {
	s := openStore(t, Options{})
	h := &countingHandler{}
	h.status.Store(http.StatusBadGateway)
	srv := serve(t, s, MiddlewareOptions{}, h)
	resp, _ := post(t, srv, "k", "x")
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	h.status.Store(0)
	resp, _ = post(t, srv, "k", "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(HeaderReplayed))
	assert.Equal(t, int64(2), h.runs.Load())
}

// A store failure fails closed with 503 and Retry-After, or runs the handler with FailOpen.
func TestMiddlewareStoreFailure(t *testing.T) {
	s, err := Open(bg, srv.URI, Options{Connection: server.Connection{Database: testDatabase(t)}})
	require.NoError(t, err)
	require.NoError(t, s.Close(bg)) // every call now fails
	h := &countingHandler{}
	closed := serve(t, s, MiddlewareOptions{}, h)
	open := serve(t, s, MiddlewareOptions{FailOpen: true}, h)
	resp, _ := post(t, closed, "k", "x")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Zero(t, h.runs.Load())
	resp, _ = post(t, open, "k", "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, int64(1), h.runs.Load())
}

// The handler gets the parsed key from the request's context; a request passed through
// without a key, and a plain context, get none.
func TestKeyFromContext(t *testing.T) {
	s := openStore(t, Options{})
	type seen struct {
		key string
		ok  bool
	}
	got := make(chan seen, 1)
	srv := serve(t, s, MiddlewareOptions{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := KeyFromContext(r.Context())
		got <- seen{key, ok}
		w.WriteHeader(http.StatusCreated)
	}))
	resp, _ := post(t, srv, `"order-\"7\""`, "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, seen{`order-"7"`, true}, <-got, "an sf-string, unquoted and unescaped")
	resp, _ = post(t, srv, "bare-key", "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, seen{"bare-key", true}, <-got)
	resp, _ = post(t, srv, "", "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, seen{}, <-got, "no key, not required: passed through without one")
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/orders", nil)
	require.NoError(t, err)
	req.Header.Set(HeaderKey, `"k"`)
	get, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, get.Body.Close())
	assert.Equal(t, http.StatusCreated, get.StatusCode)
	assert.Equal(t, seen{}, <-got, "a GET passes through: the middleware parses no key")
	key, ok := KeyFromContext(bg)
	assert.False(t, ok)
	assert.Empty(t, key)
}

func TestParseKey(t *testing.T) {
	for in, want := range map[string]string{`"abc"`: "abc", `"a\"b"`: `a"b`, `plain-uuid`: "plain-uuid", ` "x" `: "x"} {
		got, ok := parseKey(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got)
	}
	for _, in := range []string{`"abc`, `""`, `"a\b"`, `a"b`} {
		_, ok := parseKey(in)
		assert.False(t, ok, in)
	}
}
