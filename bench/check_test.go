package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/connect"
)

// passingTally and passingFinalState are a run that passes every check: executions exe-a and
// exe-b are created with the start events 0 and 1; exe-a processes 0 (emitting 2, with a
// trace step) and then 2, exe-b processes 1. Event 1 was delivered twice and skipped once.
func passingTally() tally {
	return tally{
		budget:      3,
		emitted:     map[int]int{0: 1, 1: 1, 2: 1},
		processed:   map[int]int{0: 1, 1: 1, 2: 1},
		commits:     5, // 2 creates, 3 events
		processedN:  3,
		traced:      1,
		duplicates:  1,
		redelivered: 1,
		acks:        3,
	}
}

func passingFinalState() finalState {
	return finalState{exes: []storedExecution{
		{id: "exe-a", found: true, version: 3, data: []byte(`{"handled":2,"last":"ev-0000002"}`), traced: 1},
		{id: "exe-b", found: true, version: 2, data: []byte(`{"handled":1,"last":"ev-0000001"}`)},
	}}
}

// failedChecks returns "name: detail" of each failed check.
// checkNames returns the names of cs, in order.
func checkNames(cs []check) []string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.name)
	}
	return names
}

func failedChecks(cs []check) []string {
	var failed []string
	for _, c := range cs {
		if !c.ok {
			failed = append(failed, c.name+": "+c.detail)
		}
	}
	return failed
}

func TestEndOfRunChecksPass(t *testing.T) {
	cs := endOfRunChecks(passingTally(), passingFinalState())
	require.Empty(t, failedChecks(cs))
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
		require.NotEmpty(t, c.detail, c.name)
	}
	require.Equal(t, []string{
		"every emitted event processed exactly once",
		"every redelivered event skipped by dedupe",
		"no event called processed before it was",
		"stored versions add up to the successful commits",
		"snapshots count every processed event",
		"trace steps add up to the traced commits",
		"outbox empty at the end",
		"no acked outbox entry came back",
		"no timer left after the final sweep",
	}, names)
}

// Each case breaks the passing run in one way; exactly the check it names fails, and its
// message names what failed.
func TestEndOfRunChecksFail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(*tally, *finalState)
		want  string // the one failed check, "name: detail"
	}{
		{
			name:  "an event processed twice",
			spoil: func(t *tally, _ *finalState) { t.processed[2] = 2 },
			want:  "every emitted event processed exactly once: ev-0000002 emitted 1×, processed 2×",
		},
		{
			name:  "an event never emitted",
			spoil: func(t *tally, _ *finalState) { delete(t.emitted, 1) },
			want:  "every emitted event processed exactly once: ev-0000001 emitted 0×, processed 1×",
		},
		{
			name:  "an event outside the budget",
			spoil: func(t *tally, _ *finalState) { t.emitted[7] = 1 },
			want:  "every emitted event processed exactly once: event 7 is outside the budget",
		},
		{
			name:  "a redelivered event processed again",
			spoil: func(t *tally, _ *finalState) { t.duplicates = 0 },
			want:  "every redelivered event skipped by dedupe: 1 redelivered, 0 skipped",
		},
		{
			name:  "an event skipped before it was processed",
			spoil: func(t *tally, _ *finalState) { t.skippedEarly = []string{"ev-0000002 at exe-a version 2"} },
			want:  "no event called processed before it was: 1 early skips: ev-0000002 at exe-a version 2",
		},
		{
			name:  "a commit the versions do not show",
			spoil: func(t *tally, _ *finalState) { t.commits = 6 },
			want:  "stored versions add up to the successful commits: sum of versions 5, commits 6",
		},
		{
			name: "an execution missing",
			spoil: func(t *tally, st *finalState) {
				st.exes[0] = storedExecution{id: "exe-a"}
				t.processedN, t.traced = 1, 0 // what exe-b's snapshot and trace show
			},
			want: "stored versions add up to the successful commits: sum of versions 2, commits 5; execution exe-a not found",
		},
		{
			name:  "a store's document inconsistent",
			spoil: func(_ *tally, st *finalState) { st.exes[1].problem = "trace index 4 after 5" },
			want:  "stored versions add up to the successful commits: sum of versions 5, commits 5; exe-b: trace index 4 after 5",
		},
		{
			name: "a snapshot missing a handled event",
			spoil: func(t *tally, st *finalState) {
				st.exes[0].version, t.commits = 4, 6
			},
			want: "snapshots count every processed event: 3 handled in snapshots, 3 processed; exe-a: 2 handled at version 4",
		},
		{
			name:  "a snapshot that is not JSON",
			spoil: func(_ *tally, st *finalState) { st.exes[1].data = []byte("{") },
			want:  `snapshots count every processed event: 2 handled in snapshots, 3 processed; exe-b: snapshot "{": unexpected end of JSON input`,
		},
		{
			name:  "a trace step lost",
			spoil: func(_ *tally, st *finalState) { st.exes[0].traced = 0 },
			want:  "trace steps add up to the traced commits: 0 recorded, 1 traced commits",
		},
		{
			name: "an entry left in the outbox",
			spoil: func(_ *tally, st *finalState) {
				st.pending = []pendingEntry{{OutboxEntry: execstore.OutboxEntry{Seq: 9, SourceID: "exe-a", TargetID: "exe-b"}}}
			},
			want: "outbox empty at the end: 1 pending: seq 9 of exe-a → exe-b",
		},
		{
			name:  "an acked entry back in a scan",
			spoil: func(t *tally, _ *finalState) { t.reappeared = 2 },
			want:  "no acked outbox entry came back: 3 acks, 2 reappeared",
		},
		{
			name: "a timer left after the final sweep",
			spoil: func(_ *tally, st *finalState) {
				st.timers = []execstore.DueTimer{{ExecutionID: "exe-b", Path: "Wait.T", FireAt: time.Date(2023, time.November, 14, 22, 13, 20, 250_000_000, time.UTC)}}
			},
			want: "no timer left after the final sweep: 1 left: exe-b Wait.T at 2023-11-14T22:13:20.25Z",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, st := passingTally(), passingFinalState()
			tc.spoil(&tl, &st)
			require.Equal(t, []string{tc.want}, failedChecks(endOfRunChecks(tl, st)))
		})
	}
}

// A check with many offenders names the first few and counts the rest.
func TestFailedCheckListsTheFirstOffenders(t *testing.T) {
	tl := passingTally()
	tl.budget = 10
	c := checkExactlyOnce(tl.budget, tl.emitted, tl.processed)
	require.False(t, c.ok)
	require.Equal(t, "ev-0000003 emitted 0×, processed 0×; ev-0000004 emitted 0×, processed 0×; "+
		"ev-0000005 emitted 0×, processed 0×; ev-0000006 emitted 0×, processed 0×; "+
		"ev-0000007 emitted 0×, processed 0×; and 2 more", c.detail)

	var skipped []string
	for i := range 8 {
		skipped = append(skipped, fmt.Sprintf("ev-%07d", i))
	}
	c = checkNoEarlySkip(skipped)
	require.True(t, strings.HasPrefix(c.detail, "8 early skips: ev-0000000; "), c.detail)
	require.True(t, strings.HasSuffix(c.detail, "; and 3 more"), c.detail)
}

func passingRawTally() rawTally {
	return rawTally{executions: 2, events: 3, commits: 3}
}

func passingRawDocs() []rawStored {
	return []rawStored{{Version: 3}, {Version: 2}}
}

func TestRawChecks(t *testing.T) {
	require.Empty(t, failedChecks(rawChecks(passingRawTally(), passingRawDocs())))

	for _, tc := range []struct {
		name  string
		spoil func(*rawTally, *[]rawStored)
		want  []string
	}{
		{
			name:  "an ack that matched nothing",
			spoil: func(t *rawTally, _ *[]rawStored) { t.ackMisses = 1 },
			want:  []string{"every update matched: 3 commits of 3 events, 0 commit updates and 1 ack updates matched nothing"},
		},
		{
			name: "a commit that matched nothing",
			spoil: func(t *rawTally, docs *[]rawStored) {
				t.commits, t.commitMisses = 2, 1
				(*docs)[0].Version = 2
			},
			want: []string{"every update matched: 2 commits of 3 events, 1 commit updates and 0 ack updates matched nothing"},
		},
		{
			name:  "a document missing",
			spoil: func(_ *rawTally, docs *[]rawStored) { *docs = (*docs)[:1] },
			want:  []string{"stored versions add up to the updates: sum of versions 3 over 1 documents, expected 5 over 2"},
		},
		{
			name:  "an entry left in the outbox",
			spoil: func(_ *rawTally, docs *[]rawStored) { (*docs)[1].OutboxN = 1 },
			want:  []string{"outbox empty at the end: 1 pending"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, docs := passingRawTally(), passingRawDocs()
			tc.spoil(&tl, &docs)
			require.Equal(t, tc.want, failedChecks(rawChecks(tl, docs)))
		})
	}
}

// refusingStore is an execStore whose LoadForEvent never knows an event was processed (as a
// cache that did not see it) and whose commit refuses the events of refuse with
// execstore.ErrAlreadyProcessed; every other call is unused.
type refusingStore struct {
	execStore
	refuse map[string]bool
}

func (s *refusingStore) counts() map[string]int64 { return nil }

func (s *refusingStore) loadForEvent(_ context.Context, id, _ string) (*execstore.Execution, bool, error) {
	return &execstore.Execution{ID: id, Version: 4, Data: []byte(`{"handled":3}`)}, false, nil
}

func (s *refusingStore) commit(_ context.Context, exe *execstore.Execution, c execstore.Commit) error {
	if s.refuse[c.ProcessedEventID] {
		return fmt.Errorf("wrapped: %w", &execstore.AlreadyProcessedError{ExecutionID: exe.ID, EventID: c.ProcessedEventID, Version: 7})
	}
	exe.Version++
	return nil
}

// A commit refused with ErrAlreadyProcessed is a duplicate skipped, as LoadForEvent's
// processed=true is: counted, not an error, and an early skip when no commit had processed
// the event yet.
func TestCommitRefusedAsProcessedIsADuplicate(t *testing.T) {
	cfg := config{executions: 2, events: 4, seed: 1}
	w := newEngine(cfg, &refusingStore{refuse: map[string]bool{eventID(0): true, eventID(1): true}})
	d := func(n int) delivery { return delivery{target: w.ids[n%2], id: eventID(n), n: n} }

	processed, err := w.process(t.Context(), d(1))
	require.NoError(t, err)
	require.False(t, processed, "refused: skipped")
	processed, err = w.process(t.Context(), d(2))
	require.NoError(t, err)
	require.True(t, processed)

	w.processed[0] = 1 // event 0 was processed by an earlier commit: its refusal is a plain duplicate
	processed, err = w.process(t.Context(), d(0))
	require.NoError(t, err)
	require.False(t, processed)

	tl := w.tally()
	require.Equal(t, int64(2), tl.duplicates)
	require.Equal(t, int64(2), w.counts()["refused_by_commit"])
	require.Equal(t, []string{"ev-0000001 at exe-000001 version 7"}, tl.skippedEarly,
		"event 1 refused before any commit processed it, found at the refusal's version")
	c := checkNoEarlySkip(tl.skippedEarly)
	require.False(t, c.ok)
}

// On a server where acked entries have been measured to come back, one that does is
// reported, not failed; elsewhere it fails the run. Only the DocumentDB family is such a
// server.
func TestAckedEntryThatCameBack(t *testing.T) {
	assert.False(t, checkAcks(3, 1, false).ok)
	got := checkAcks(3, 1, true)
	assert.True(t, got.ok)
	assert.Contains(t, got.detail, "1 reappeared")
	assert.True(t, checkAcks(3, 0, false).ok)
	assert.True(t, ackedMayReturn(connect.FamilyFerretDB2))
	assert.True(t, ackedMayReturn(connect.FamilyDocumentDB))
	assert.False(t, ackedMayReturn(connect.FamilyMongoDB))
	assert.False(t, ackedMayReturn(connect.FamilyFerretDB1))
}
