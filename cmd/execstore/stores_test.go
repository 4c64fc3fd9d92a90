package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
)

// stamp matches the times the server stamps (claims, completions, its clock), and what
// follows one in text output: how far it is from now.
var stamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z( \([^)]*\))?`)

// normalised replaces the server's times in s with TIME.
func normalised(s string) string { return stamp.ReplaceAllString(s, "TIME") }

// TestIdemGet checks `idem get` on records idem wrote: a live claim, a claim whose lease
// lapsed (by the server's clock) and a completed record, whose header values are never
// printed and whose body is only with -body.
func TestIdemGet(t *testing.T) {
	f := populate(t)

	done := f.inspect(t, "idem", "get", "req-done")
	require.Equal(t, `key               req-done
state             COMPLETED
fingerprint       fp-done (version 2)
claimed at        TIME
completed at      TIME
retention until   TIME
lapsed            no
reapable at       TIME
now               TIME
response status   201
response headers  Content-Type, X-Session
response body     29 bytes (-body shows it)
`, normalised(done))
	require.Contains(t, done, "(server clock)")
	require.Regexp(t, `retention until +\S+ \(in (23h59m|1d)`, done)
	require.NotContains(t, done, "hdr-secret-value")
	require.NotContains(t, done, `"ok":true`)

	withBody := f.inspect(t, "idem", "get", "req-done", "-body")
	require.Contains(t, withBody, `response body     29 bytes, JSON: {"order":"order-1","ok":true}`)
	require.NotContains(t, withBody, "hdr-secret-value")

	require.Equal(t, `key          req-claimed
state        CLAIMED
fingerprint  fp-claimed (version 1)
claimed at   TIME
lease until  TIME
lapsed       no
reapable at  TIME
now          TIME
`, normalised(f.inspect(t, "idem", "get", "req-claimed")))
	require.Contains(t, normalised(f.inspect(t, "idem", "get", "req-lapsed")),
		"lapsed       yes: the lease has ended; the next claim takes the key over\n")

	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "get", "req-done", "-json", "-body")), &r))
	for _, k := range []string{"claimed_at", "completed_at", "until", "reapable_at", "now"} {
		require.Regexp(t, stamp, r[k], k)
		r[k] = "TIME"
	}
	want := `{"key": "req-done", "state": "COMPLETED", "fingerprint": "fp-done", "fingerprint_version": 2,
		"claimed_at": "TIME", "completed_at": "TIME", "until": "TIME", "until_is": "retention",
		"reapable_at": "TIME", "lapsed": false, "now": "TIME", "clock": "server",
		"response": {"status": 201, "header_names": ["Content-Type", "X-Session"], "body_bytes": 29,
		             "body": {"bytes": 29, "kind": "json", "json": {"order": "order-1", "ok": true}}},
		"problems": []}`
	got, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, want, string(got))

	var lapsed inspect.IdemRecord
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "get", "req-lapsed", "-json")), &lapsed))
	require.True(t, lapsed.Lapsed)
	require.Equal(t, "lease", lapsed.UntilIs)
	require.Nil(t, lapsed.Response)
	require.Empty(t, lapsed.Problems)
}

// TestJournalShow checks `journal show` on an invocation the journal wrote: its metadata,
// each ciphertext as its size and key id, and none of the plaintexts it sealed, in text or
// JSON.
func TestJournalShow(t *testing.T) {
	f := populate(t)

	text := f.inspect(t, "journal", "show", "pay-1")
	// A KeyRing ciphertext is 1 + 1 + len("k1") + 12 (nonce) + the plaintext + 16 (tag).
	require.Equal(t, strings.ReplaceAll(`invocation  pay-1
scope       shop/payments
digest      sha256:4f2a
owner       worker-a
revision    6
checkpoint  CKPT, phase before; sealed, 60 bytes, key "k1"
prepared    from checkpoint CKPT; sealed, 61 bytes, key "k1"
attempts    1
latest      succeeded
no replay   yes

receipts: 2
  ATTEMPT  OUTCOME    EVIDENCE
  1        unknown    sealed, 32 bytes, key "k1"
  1        succeeded  sealed, 55 bytes, key "k1"

(sealed payloads are never opened here: sizes and key ids only)
`, "CKPT", f.checkpointID), text)

	js := f.inspect(t, "journal", "show", "-json", "pay-1")
	require.JSONEq(t, strings.ReplaceAll(`{
  "id": "pay-1", "scope": "shop/payments", "digest": "sha256:4f2a", "owner": "worker-a", "revision": 6,
  "checkpoint": {"id": "CKPT", "phase": "before", "sealed": {"bytes": 60, "key_id": "k1"}},
  "prepared": {"from": "CKPT", "sealed": {"bytes": 61, "key_id": "k1"}},
  "attempts": 1, "latest": "succeeded", "no_replay": true,
  "receipts": [
    {"attempt": 1, "outcome": "unknown", "sealed": {"bytes": 32, "key_id": "k1"}},
    {"attempt": 1, "outcome": "succeeded", "sealed": {"bytes": 55, "key_id": "k1"}}
  ]
}`, "CKPT", f.checkpointID), js)

	for _, out := range []string{text, js} {
		for _, p := range sealedPlaintexts {
			require.NotContains(t, out, p)
			require.NotContains(t, out, "PLAINTEXT")
		}
	}
}

// TestServer checks `server`: the server identified as the stores identify it.
func TestServer(t *testing.T) {
	f := populateNothing(t)
	var r inspect.Server
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "server", "-json")), &r))
	require.NotEmpty(t, r.Family)
	require.Contains(t, []string{"mongodb", "ferretdb"}, r.Profile)
	require.Positive(t, r.MaxWireVersion)
	require.Len(t, r.Probes, 1)
	require.Equal(t, r.Probes[0].Served, r.Profile == "mongodb", "the profile follows the probe")
	require.Regexp(t, `(?m)^family +\S+\nversion +\S+\nmax wire version +\d+\nferretdb version +\S+\naio profile +\S+\n`+
		`aggregation expressions in find projections +(served|refused: .+)\n$`, f.inspect(t, "server"))
}

// TestJournalRetention checks `journal retention` against the journal's own totals: the
// fixture's one invocation deleted, when, and nothing for a collection no retention ran on.
func TestJournalRetention(t *testing.T) {
	f := populate(t)
	text := f.inspect(t, "journal", "retention")
	require.Regexp(t, `^journal +journal\ndeleted +1 finished invocations, for their retention\nlast deleted at +\d{4}-\d\d-\d\dT[\d:.]+Z\n$`, text)
	var r inspect.JournalRetention
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "journal", "retention", "-json")), &r))
	require.Equal(t, "journal", r.Collection)
	require.EqualValues(t, 1, r.Deleted)
	require.NotEmpty(t, r.LastAt)
	require.JSONEq(t, `{"collection": "other", "deleted": 0}`, f.inspect(t, "journal", "retention", "-collection", "other", "-json"))
}
