package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/journal"
)

func TestJournalChecksPass(t *testing.T) {
	tally, stored := passingJournalRun()
	got := map[string]string{}
	for _, c := range journalChecks(tally, stored, 2) {
		require.True(t, c.ok, c.name)
		got[c.name] = c.detail
	}
	require.Equal(t, map[string]string{
		"no error": "2 invocations",
		"every invocation claimed exactly once by its owner":  "2 invocations",
		"every invocation reconciled succeeded at revision 5": "2 of 2",
	}, got)
}

// Every case spoils the passing run once; the failed checks are exactly the ones listed, each
// naming the invocation at fault.
func TestJournalChecksFail(t *testing.T) {
	i0, i1 := journalID(0), journalID(1)
	const succeeded = "every invocation reconciled succeeded at revision 5: "
	const claimed = "every invocation claimed exactly once by its owner: "
	edit := func(id string, f func(*journalRecord)) func(*journalTally, map[string]journalRecord, *int) {
		return func(_ *journalTally, s map[string]journalRecord, _ *int) {
			r := s[id]
			f(&r)
			s[id] = r
		}
	}
	for _, tc := range []struct {
		name  string
		spoil func(*journalTally, map[string]journalRecord, *int)
		want  []string
	}{
		{
			name: "a call failed",
			spoil: func(t *journalTally, _ map[string]journalRecord, _ *int) {
				t.errs[1] = errors.New("dispatch: boom")
				t.final[1] = 4
			},
			want: []string{"no error: 1 errors: " + i1 + ": dispatch: boom", succeeded + i1 + ": reconcile returned revision 4"},
		},
		{
			name:  "an invocation claimed twice",
			spoil: func(t *journalTally, _ map[string]journalRecord, _ *int) { t.claims[0] = 2 },
			want:  []string{claimed + i0 + " claimed 2 times"},
		},
		{
			name:  "an invocation nobody ran",
			spoil: func(t *journalTally, _ map[string]journalRecord, _ *int) { t.owners[0], t.claims[0] = "", 0 },
			want:  []string{claimed + i0 + " claimed 0 times"},
		},
		{
			name:  "a claim that found the invocation already claimed",
			spoil: func(t *journalTally, _ map[string]journalRecord, _ *int) { t.claimRev[1] = 3 },
			want:  []string{claimed + i1 + ": claim returned revision 3"},
		},
		{
			name:  "another owner stored",
			spoil: edit(i0, func(r *journalRecord) { r.owner = journalOwner(7) }),
			want:  []string{claimed + i0 + `: stored owner "caller-007", claimed by "caller-000"`},
		},
		{
			name: "a read that failed",
			spoil: func(_ *journalTally, s map[string]journalRecord, _ *int) {
				s[i1] = journalRecord{err: journal.ErrIntegrity}
			},
			want: []string{"no error: 1 errors: " + i1 + ": read: journal: stored record refused",
				claimed + i1 + ": not read back", succeeded + i1 + ": stored at revision 0"},
		},
		{
			name:  "a stored revision past the expected",
			spoil: edit(i0, func(r *journalRecord) { r.revision = 6 }),
			want:  []string{succeeded + i0 + ": stored at revision 6"},
		},
		{
			name:  "an invocation left pending",
			spoil: edit(i1, func(r *journalRecord) { r.latest = "pending"; r.receipts = nil }),
			want:  []string{succeeded + i1 + `: stored latest "pending" after 1 attempts (no replay false)`},
		},
		{
			name: "a receipt of another invocation",
			spoil: edit(i0, func(r *journalRecord) {
				r.receipts = []journal.Receipt{{Attempt: 1, Outcome: journal.Succeeded, Data: journalReceipt(i1)}}
			}),
			want: []string{succeeded + i0 + `: stored receipts [1 succeeded "charge ch_` + i1 + `"]`},
		},
		{
			name:  "prepared from another checkpoint",
			spoil: edit(i1, func(r *journalRecord) { r.preparedFrom = "other" }),
			want:  []string{succeeded + i1 + `: stored checkpoint "ckpt-` + i1 + `" (prepared from "other"), written "ckpt-` + i1 + `"`},
		},
		{
			name:  "a checkpoint state changed",
			spoil: edit(i0, func(r *journalRecord) { r.state = bytes.Clone(journalState(i1)) }),
			want:  []string{succeeded + i0 + `: stored checkpoint "ckpt-` + i0 + `" (prepared from "ckpt-` + i0 + `"), written "ckpt-` + i0 + `"`},
		},
		{
			name:  "a record of no invocation",
			spoil: func(_ *journalTally, _ map[string]journalRecord, records *int) { *records = 3 },
			want:  []string{succeeded + "3 records stored for 2 invocations"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tally, stored := passingJournalRun()
			records := 2
			tc.spoil(tally, stored, &records)
			require.Equal(t, tc.want, failedChecks(journalChecks(tally, stored, records)))
		})
	}
}

// The journal rows follow the idempotency rows; a failed journal check fails the run: it is
// named in the checks section, the row says FAIL, and the verdict is FAIL.
func TestJournalRowsInTheTable(t *testing.T) {
	cfg := config{executions: 2, events: 3, rounds: 1, seed: 1, idemKeys: 2, journalInvocations: 2}
	engine := []runResult{newRunResult(cfg, "s", []measured{{spec: runSpec{variant: variantAIO, concurrency: 1},
		window: window{processed: 3, wall: 1e9}}})}
	idemRow := idemResult{Design: idemDesignSeed, Concurrency: 1, NotRun: idemNotServed}
	tally, stored := passingJournalRun()
	m := journalMeasured{concurrency: 64, invocations: 2, weak: true, wall: 1e9 / 2, checks: journalChecks(tally, stored, 2),
		commands: commandCounts{"insert": 2, "update": 6, "findAndModify": 2},
		latency:  []time.Duration{2e6, 4e6}}
	ok := newJournalResult(journalResult{Workload: workloadJournal, Design: journalDesign}, m)
	require.Equal(t, 4.0, ok.InvocationsPerS)
	require.Equal(t, 5.0, ok.CmdsPerInvocation)
	require.Equal(t, map[string]float64{"insert": 1, "update": 3, "findAndModify": 1}, ok.CommandsPerName)
	require.Equal(t, 2.0, ok.P50ms)
	require.Equal(t, 4.0, ok.P99ms)
	require.True(t, ok.WeakDurability)

	var out bytes.Buffer
	writeTable(&out, cfg, "s", engine, []idemResult{idemRow}, []journalResult{ok}, nil)
	s := out.String()
	require.Regexp(t, `\n +journal +64 +4\.0 +2\.0 +4\.0 +5\.00 +ok\n`, s)
	require.Contains(t, s, "\n"+journalWeakNote+"\n")
	require.Less(t, strings.Index(s, "seed-port (idemkit)"), strings.Index(s, "operation journal:"), "after the idempotency rows")
	require.Contains(t, s, "  check   operation journal: 1 of 1 rows passed every check\n")
	require.NotContains(t, s, "check   idempotency keys", "a design not run is not counted as checked")

	tally.errs[0] = errors.New("claim: boom")
	m.checks = journalChecks(tally, stored, 2)
	m.weak = false
	bad := newJournalResult(journalResult{Workload: workloadJournal, Design: journalDesign}, m)
	out.Reset()
	writeTable(&out, cfg, "s", engine, nil, []journalResult{bad}, nil)
	require.Regexp(t, `\n +journal +64 .* FAIL\n`, out.String())
	require.Contains(t, out.String(), "\n"+journalStrongNote+"\n")
	require.Contains(t, out.String(), "\n  FAILED  journal ×64: no error: 1 errors: "+journalID(0)+": claim: boom")
	require.Equal(t, 1, writeVerdict(&out, checkedWorkloads(engine, nil, []journalResult{bad}), nil, nil))
	require.NotContains(t, out.String(), "PASS:")
	require.True(t, bad.failed())
	require.False(t, ok.failed())
}

// passingJournalRun is a run of two invocations that passes every check: each claimed once
// by its caller at revision 1, reconciled Succeeded at journalRevision, and stored so.
func passingJournalRun() (*journalTally, map[string]journalRecord) {
	t := newJournalTally(2)
	stored := make(map[string]journalRecord, len(t.ids))
	for i, id := range t.ids {
		ckpt := "ckpt-" + id
		t.owners[i], t.claims[i], t.claimRev[i], t.final[i], t.checkpoint[i] = journalOwner(i), 1, 1, journalRevision, ckpt
		stored[id] = journalRecord{owner: journalOwner(i), revision: journalRevision, state: journalState(id),
			checkpointID: ckpt, preparedFrom: ckpt, attempts: 1, latest: "succeeded",
			receipts: []journal.Receipt{{Attempt: 1, Outcome: journal.Succeeded, Data: journalReceipt(id)}}}
	}
	return t, stored
}
