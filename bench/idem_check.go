package main

import (
	"bytes"
	"fmt"

	"github.com/execstore/execstore/idem"
)

// idemChecks checks a run of the idempotency workload: what it saw, t, against the records
// stored at the end, by key.
func idemChecks(t *idemTally, stored map[string]idemRecord) []check {
	return []check{
		checkIdemClaimedOnce(t),
		checkIdemCompleted(t, stored),
		checkIdemReplays(t),
	}
}

// checkIdemClaimedOnce: every key was claimed exactly once: one token per key over its claim
// and its replay, and no token given for two keys.
func checkIdemClaimedOnce(t *idemTally) check {
	c := check{name: "every key claimed exactly once"}
	var bad []string
	owner := map[string]string{}
	for i, key := range t.keys {
		if n := len(t.tokens[i]); n != 1 {
			bad = append(bad, fmt.Sprintf("%s got %d tokens", key, n))
		}
		for _, tok := range t.tokens[i] {
			if prev, dup := owner[tok]; dup && prev != key {
				bad = append(bad, fmt.Sprintf("token %s given for %s and %s", tok, prev, key))
			}
			owner[tok] = key
		}
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d keys, %d tokens", len(t.keys), len(owner))
	if !c.ok {
		c.detail = listed(bad)
	}
	return c
}

// checkIdemCompleted: every complete matched its claim, and every key's record is stored
// Completed with its response; no other record is stored.
func checkIdemCompleted(t *idemTally, stored map[string]idemRecord) check {
	c := check{name: "every completion stored"}
	var bad []string
	done := 0
	for i, key := range t.keys {
		rec, found := stored[key]
		switch {
		case !t.completed[i]:
			bad = append(bad, fmt.Sprintf("%s: complete did not match its claim", key))
		case !found:
			bad = append(bad, fmt.Sprintf("%s: no record", key))
		case rec.state != string(idem.Completed):
			bad = append(bad, fmt.Sprintf("%s: stored %q", key, rec.state))
		case !bytes.Equal(rec.body, idemBody(key)):
			bad = append(bad, fmt.Sprintf("%s: stored body %q", key, rec.body))
		default:
			done++
		}
	}
	if extra := len(stored) - done; len(bad) == 0 && extra != 0 {
		bad = append(bad, fmt.Sprintf("%d records stored for %d keys", len(stored), len(t.keys)))
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d of %d stored", done, len(t.keys))
	if !c.ok {
		c.detail = listed(bad)
	}
	return c
}

// checkIdemReplays: every claim of a completed key found it AlreadyCompleted and returned the
// stored response byte for byte.
func checkIdemReplays(t *idemTally) check {
	c := check{name: "every replay returned the stored response byte-exact"}
	var bad []string
	for i, key := range t.keys {
		r := t.replays[i]
		switch {
		case r.outcome != idem.AlreadyCompleted:
			bad = append(bad, fmt.Sprintf("%s: replay %s", key, r.outcome))
		case !bytes.Equal(r.body, idemBody(key)):
			bad = append(bad, fmt.Sprintf("%s: replayed body %q", key, r.body))
		}
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d replays, %d wrong", len(t.keys), len(bad))
	if !c.ok {
		c.detail = fmt.Sprintf("%d of %d wrong: %s", len(bad), len(t.keys), listed(bad))
	}
	return c
}
