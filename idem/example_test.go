package idem_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/server"
)

// Do runs a payment once per key while its runner lives: the retry gets the stored response,
// and the function does not run again.
func ExampleStore_Do() {
	ctx := context.Background()
	// A MongoDB-compatible server inside the process; use your MongoDB's URI instead.
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	store, err := idem.Open(ctx, srv.URI(), idem.Options{Connection: server.Connection{Database: "example_do"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	charge := func(ctx context.Context) (idem.Response, error) {
		fmt.Println("charging the card")
		return idem.Response{Status: 201, Body: []byte(`{"payment":"p-1"}`)}, nil
	}
	for range 2 {
		res, err := store.Do(ctx, "pay-order-1", "order-1:42.00", charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Response.Status, string(res.Response.Body), "replayed:", res.Replayed)
	}
	// Output:
	// charging the card
	// 201 {"payment":"p-1"} replayed: false
	// 201 {"payment":"p-1"} replayed: true
}

// The middleware makes a POST handler idempotent by its Idempotency-Key header.
func ExampleStore_Middleware() {
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	store, err := idem.Open(ctx, srv.URI(), idem.Options{Connection: server.Connection{Database: "example_http"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	orders := 0
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", orders))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d created", orders)
	})
	api := httptest.NewServer(store.Middleware(idem.MiddlewareOptions{Required: true})(create))
	defer api.Close()

	send := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := api.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %q location=%s replayed=%s\n", resp.StatusCode, strings.TrimSpace(string(b)),
			resp.Header.Get("Location"), resp.Header.Get("Idempotent-Replayed"))
	}
	send(`"8e03978e-40d5"`, `{"item":"book"}`) // runs the handler
	send(`"8e03978e-40d5"`, `{"item":"book"}`) // a retry: replayed
	send(`"8e03978e-40d5"`, `{"item":"pen"}`)  // the key reused for another request
	send("", `{"item":"book"}`)                // no key
	// Output:
	// 201 "order 1 created" location=/orders/1 replayed=
	// 201 "order 1 created" location=/orders/1 replayed=true
	// 422 "Idempotency-Key reused with a different request" location= replayed=
	// 400 "Idempotency-Key header required" location= replayed=
}

// The handler behind the middleware reads the request's key, parsed from its sf-string,
// for instance to pass it on to a payment provider.
func ExampleKeyFromContext() {
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	store, err := idem.Open(ctx, srv.URI(), idem.Options{Connection: server.Connection{Database: "example_key"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := idem.KeyFromContext(r.Context())
		fmt.Printf("handler: key %q, %v\n", key, ok)
		w.WriteHeader(http.StatusCreated)
	})
	api := httptest.NewServer(store.Middleware(idem.MiddlewareOptions{})(pay))
	defer api.Close()

	for _, key := range []string{`"pay-\"42\""`, ""} {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/payments", strings.NewReader("{}"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := api.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	_, ok := idem.KeyFromContext(ctx)
	fmt.Println("a plain context:", ok)
	// Output:
	// handler: key "pay-\"42\"", true
	// 201
	// handler: key "", false
	// 201
	// a plain context: false
}
