package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/idem"
)

// passingIdemRun is a run of two keys that passes every check: each claimed once with its
// own token, completed, stored, and replayed byte-exact.
func passingIdemRun() (*idemTally, map[string]idemRecord) {
	t := newIdemTally(2)
	stored := map[string]idemRecord{}
	for i, key := range t.keys {
		t.tokens[i] = []string{"token-" + key}
		t.completed[i] = true
		t.replays[i] = idemClaim{outcome: idem.AlreadyCompleted, body: idemBody(key)}
		stored[key] = idemRecord{state: "COMPLETED", body: idemBody(key)}
	}
	return t, stored
}

func TestIdemChecksPass(t *testing.T) {
	tally, stored := passingIdemRun()
	cs := idemChecks(tally, stored)
	require.Empty(t, failedChecks(cs))
	require.Equal(t, []string{
		"every key claimed exactly once",
		"every completion stored",
		"every replay returned the stored response byte-exact",
	}, checkNames(cs))
}

// Each case breaks the passing run in one way; exactly the check it names fails, and its
// message names the offender.
func TestIdemChecksFail(t *testing.T) {
	k0, k1 := idemKey(0), idemKey(1)
	for _, tc := range []struct {
		name  string
		spoil func(*idemTally, map[string]idemRecord)
		want  string
	}{
		{
			name:  "a key claimed twice",
			spoil: func(t *idemTally, _ map[string]idemRecord) { t.tokens[1] = append(t.tokens[1], "another") },
			want:  "every key claimed exactly once: " + k1 + " got 2 tokens",
		},
		{
			name:  "a key never claimed",
			spoil: func(t *idemTally, _ map[string]idemRecord) { t.tokens[0] = nil },
			want:  "every key claimed exactly once: " + k0 + " got 0 tokens",
		},
		{
			name:  "one token for two keys",
			spoil: func(t *idemTally, _ map[string]idemRecord) { t.tokens[1] = []string{"token-" + k0} },
			want:  "every key claimed exactly once: token token-" + k0 + " given for " + k0 + " and " + k1,
		},
		{
			name:  "a complete that did not match",
			spoil: func(t *idemTally, _ map[string]idemRecord) { t.completed[0] = false },
			want:  "every completion stored: " + k0 + ": complete did not match its claim",
		},
		{
			name:  "a record missing",
			spoil: func(_ *idemTally, s map[string]idemRecord) { delete(s, k1) },
			want:  "every completion stored: " + k1 + ": no record",
		},
		{
			name:  "a record left claimed",
			spoil: func(_ *idemTally, s map[string]idemRecord) { s[k0] = idemRecord{state: "CLAIMED"} },
			want:  "every completion stored: " + k0 + ": stored \"CLAIMED\"",
		},
		{
			name:  "a stored body changed",
			spoil: func(_ *idemTally, s map[string]idemRecord) { s[k0] = idemRecord{state: "COMPLETED", body: []byte("x")} },
			want:  "every completion stored: " + k0 + ": stored body \"x\"",
		},
		{
			name:  "a record of no key",
			spoil: func(_ *idemTally, s map[string]idemRecord) { s["stray"] = idemRecord{} },
			want:  "every completion stored: 3 records stored for 2 keys",
		},
		{
			name: "a replay that was not AlreadyCompleted",
			spoil: func(t *idemTally, _ map[string]idemRecord) {
				t.replays[1] = idemClaim{outcome: idem.AlreadyClaimed}
			},
			want: "every replay returned the stored response byte-exact: 1 of 2 wrong: " + k1 + ": replay already claimed",
		},
		{
			name: "a replay not byte-exact",
			spoil: func(t *idemTally, _ map[string]idemRecord) {
				t.replays[0].body = t.replays[0].body[:len(t.replays[0].body)-1]
			},
			want: "every replay returned the stored response byte-exact: 1 of 2 wrong: " + k0 +
				": replayed body \"{\\\"key\\\":\\\"" + k0 + "\\\",\\\"status\\\":\\\"charged\\\"}\\x00\\xff\\xfe\"",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tally, stored := passingIdemRun()
			tc.spoil(tally, stored)
			require.Equal(t, []string{tc.want}, failedChecks(idemChecks(tally, stored)))
		})
	}
}

// A failed idempotency check fails the run: it is named in the checks section, the row says
// FAIL, and the verdict is FAIL; a design not run is said so, without figures, and is not
// counted as checked.
func TestIdemRowsInTheTable(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1, idemKeys: 2}
	engine := []runResult{newRunResult(cfg, "s", []measured{{spec: runSpec{variant: variantAIO, concurrency: 1},
		window: window{processed: 3, wall: 1e9}}})}
	tally, stored := passingIdemRun()
	m := idemMeasured{design: idemDesignStore, concurrency: 64, keys: 2, checks: idemChecks(tally, stored),
		phases: map[string]idemPhase{
			"claim":    {wall: 1e9 / 2, commands: commandCounts{"find": 2, "insert": 2}},
			"complete": {wall: 1e9, commands: commandCounts{"update": 2}},
			"replay":   {wall: 1e9 / 4, commands: commandCounts{"find": 2}},
		}}
	ok := newIdemResult(idemResult{Design: idemDesignStore, Concurrency: 64, Keys: 2}, m)
	require.Equal(t, 4.0, ok.ClaimsPerS)
	require.Equal(t, 2.0, ok.CompletesPerS)
	require.Equal(t, 8.0, ok.ReplaysPerS)
	require.Equal(t, 2.0, ok.CmdsPerClaim)
	require.Equal(t, map[string]float64{"find": 1, "insert": 1}, ok.CommandsPerOp["claim"])
	notRun := idemResult{Design: idemDesignSeed, Concurrency: 64, NotRun: idemNotServed + ": (FailedToParse) $$NOW is not supported in this context."}

	var out bytes.Buffer
	writeTable(&out, cfg, "s", engine, []idemResult{ok, notRun}, nil, nil)
	require.Regexp(t, `\n +idem +64 +4\.0 +2\.0 +8\.0 +2\.00 +1\.00 +1\.00 +ok\n`, out.String())
	require.Contains(t, out.String(), "\nseed-port (idemkit): not run here: needs $$NOW in update pipelines, which this server refuses: (FailedToParse) $$NOW is not supported in this context.\n")
	require.Contains(t, out.String(), "  check   idempotency keys: 1 of 1 rows passed every check\n")
	require.Zero(t, writeVerdict(&out, checkedWorkloads(engine, []idemResult{ok, notRun}, nil), nil, nil))

	tally.replays[0].body = nil
	m.checks = idemChecks(tally, stored)
	bad := newIdemResult(idemResult{Design: idemDesignStore, Concurrency: 64, Keys: 2}, m)
	out.Reset()
	writeTable(&out, cfg, "s", engine, []idemResult{bad, notRun}, nil, nil)
	require.Regexp(t, `\n +idem +64 .* FAIL\n`, out.String())
	require.Contains(t, out.String(), "  check   idempotency keys: 0 of 1 rows passed every check\n")
	require.Contains(t, out.String(), "\n  FAILED  idem ×64: every replay returned the stored response byte-exact: 1 of 2 wrong: "+idemKey(0))
	require.Equal(t, 1, writeVerdict(&out, checkedWorkloads(engine, []idemResult{bad, notRun}, nil), nil, nil))
	require.True(t, strings.HasSuffix(out.String(), "\nFAIL: 1 end-of-run check failed (listed above)\n"))
	require.True(t, bad.failed())
	require.False(t, ok.failed())
	require.False(t, notRun.failed(), "a design not run has failed nothing")
}
