package idemcheck

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

const token = "0123456789abcdef0123456789abcdef"

func TestChecks(t *testing.T) {
	held := func(h [2]string) (string, string) { return h[0], h[1] }
	for _, c := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"claim", ClaimAs("k", "fp", time.Second, "relay-1"), true},
		{"claim: empty key", ClaimAs("", "fp", time.Second, ""), false},
		{"claim: oversized fingerprint", ClaimAs("k", strings.Repeat("f", MaxFingerprintBytes+1), time.Second, ""), false},
		{"claim: lease under 1ms", ClaimAs("k", "fp", time.Millisecond-1, ""), false},
		{"claim: oversized holder", ClaimAs("k", "fp", time.Second, strings.Repeat("h", MaxHolderBytes+1)), false},
		{"claim: holder not UTF-8", ClaimAs("k", "fp", time.Second, "\xff"), false},
		{"complete", Complete("k", token, 200, http.Header{"A": {"b"}}, []byte("x"), time.Hour, 0), true},
		{"complete: upper-case token", Complete("k", strings.ToUpper(token), 200, nil, nil, time.Hour, 0), false},
		{"complete: short token", Complete("k", token[1:], 200, nil, nil, time.Hour, 0), false},
		{"complete: no retention", Complete("k", token, 200, nil, nil, 0, 0), false},
		{"complete: status 99", Complete("k", token, 99, nil, nil, time.Hour, 0), false},
		{"complete: status 1000", Complete("k", token, 1000, nil, nil, time.Hour, 0), false},
		{"complete: body at the default bound", Complete("k", token, 200, nil, make([]byte, DefaultMaxBodyBytes), time.Hour, 0), true},
		{"complete: body past the default bound", Complete("k", token, 200, nil, make([]byte, DefaultMaxBodyBytes+1), time.Hour, 0), false},
		{"complete: body past a bound of 10", Complete("k", token, 200, nil, make([]byte, 11), time.Hour, 10), false},
		{"complete: oversized headers", Complete("k", token, 200, http.Header{"A": {strings.Repeat("v", MaxHeaderBytes)}}, nil, time.Hour, 0), false},
		{"renew all", RenewAll([][2]string{{"a", token}, {"b", token}}, held, time.Second), true},
		{"renew all: none", RenewAll([][2]string{}, held, time.Second), true},
		{"renew all: a bad token", RenewAll([][2]string{{"a", token}, {"b", "x"}}, held, time.Second), false},
		{"renew all: no lease", RenewAll([][2]string{{"a", token}}, held, 0), false},
		{"release", Release("k", token), true},
		{"release: bad token", Release("k", "nope"), false},
		{"list", List("p/", 0), true},
		{"list: empty prefix", List("", 10), false},
		{"list: negative limit", List("p/", -1), false},
	} {
		if c.ok && c.err != nil {
			t.Errorf("%s: %v, want nil", c.name, c.err)
		}
		var inv *execstore.InvalidError
		if !c.ok && (!errors.Is(c.err, execstore.ErrInvalid) || !errors.As(c.err, &inv)) {
			t.Errorf("%s: %v, want an *execstore.InvalidError", c.name, c.err)
		}
	}
}
