// Package storetest checks that an execution store keeps the execstore contract, in the
// manner of testing/fstest.TestFS. Run exercises every behaviour the contract promises, as
// named subtests against stores the caller makes. That covers version CAS with expected and
// found versions, atomic commits, the outbox and spawn relays, dedupe, and Commit's dedupe
// guard: a commit of an event already processed is refused with an
// *execstore.AlreadyProcessedError, before a conflict, on the create path too, and writes
// nothing. It also covers durable timers and their fire times' precision, the trace, listing
// with cursors, bad input, concurrency, context and Close, and that a store never returns a
// snapshot older than its own last commit. RunWindows checks the trace and dedupe windows a
// store is configured with, and that the dedupe guard follows the window. RunShared checks
// two stores over the same data, as two processes sharing executions have them. A stale
// snapshot (a cache's, say) ends in a conflict, never in a lost update. An event processed
// through one store is refused through the other. What either commits, the other relays.
//
// The MongoDB store (package aio, on a real server) and the in-memory store (package
// memstore) both pass it. So must any other implementation of execstore.Store. Behaviours
// only one implementation can show (how many server commands a commit costs, what a
// connection reset does) are tested with that implementation.
package storetest

import (
	"context"
	"testing"

	"github.com/execstore/execstore"
)

// Run runs every behaviour of the execstore contract against stores made by open, each
// behaviour as a subtest on a store of its own. open must return a new, empty store each time
// it is called, configured with its defaults (a TraceMax of at least 10), and release it with
// t.Cleanup. Run closes only the stores it uses to check Close itself. When the stores
// implement execstore.Partitioned, Run also checks that a scan of some partitions is the
// whole scan restricted to them, in the same order, that a partition out of range is
// refused with execstore.ErrInvalid, and that a scan of no partition returns nothing. When
// they implement execstore.Targeted, Run also runs RunTargeted, when they implement
// execstore.Excluding, RunExcluding, and when they implement
// execstore.DeadLetters, RunDeadLetters.
func Run(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runEach(t, behaviours, open)
	runPartitioned(t, open)
	runTargeted(t, open)
	runExcluding(t, open)
	runDeadLetters(t, open)
	runRetaining(t, open)
}

// Windows is how RunWindows asks for a store to be configured.
type Windows struct {
	// TraceMax is how many trace steps an execution keeps.
	TraceMax int
	// DedupeWindow is the dedupe window. The set keeps the event ids of at least the last
	// DedupeWindow commits and of at most the last 2×DedupeWindow. 0 keeps every id.
	DedupeWindow int
}

// RunWindows checks the trace window and the dedupe window. open must return a new, empty
// store configured as w says, and release it with t.Cleanup.
func RunWindows(t *testing.T, open func(t *testing.T, w Windows) execstore.Store) {
	t.Helper()
	for _, b := range windowBehaviours {
		t.Run(b.name, func(t *testing.T) { b.check(t, open) })
	}
}

type windowBehaviour struct {
	name  string
	check func(t *testing.T, open func(t *testing.T, w Windows) execstore.Store)
}

// behaviours lists what Run checks, in the order of the contract.
var behaviours = []behaviour[execstore.Store]{
	{"FirstSaveCreatesVersion1", firstSave},
	{"SequentialSavesIncrementTheVersion", sequentialSaves},
	{"SnapshotRoundTrips", snapshotRoundTrip},
	{"LoadOfUnknownIsNil", loadUnknown},
	{"StaleWriteIsAConflict", staleWrite},
	{"CommitWithoutDocumentIsAConflict", commitMissingDocument},
	{"CommitWritesOutboxAndDedupeMark", commitOutboxAndDedupe},
	{"AckRemovesExactlyOneEntry", ackRemovesExactlyOne},
	{"OutboxInCommitOrderAcrossExecutions", outboxOrderAcrossExecutions},
	{"LostCommitLeaksNothing", lostCommitLeaksNothing},
	{"SpawnsAreRelayedAndAcked", spawns},
	{"EntriesRecordWhenTheirCommitWasMade", entriesRecordTheirCommit},
	{"TimersScheduleRescheduleCancel", timers},
	{"TimersEarliestFirstAndLastOpWins", timersOrderAndLastOpWins},
	{"TimerPathsRoundTrip", timerPaths},
	{"DeleteTimerIsGuardedByFireTime", guardedDelete},
	{"DueTimersLimit", dueTimersLimit},
	{"DeleteTimersInBulk", deleteTimers},
	{"DeleteTimersSparesARearmToTheSameFireTime", rearmSurvivesDelete},
	{"FireTimesReadBackWithinTheirPrecision", fireTimePrecision},
	{"TimerIsDueFromItsFireAt", dueFromFireAt},
	{"BadFireTimesAreInvalid", fireTimeRefusals},
	{"TraceIndicesIncrease", traceIndices},
	{"AppendTraceOutsideACommit", appendTrace},
	{"TraceStepsRecordTheirTime", traceTimes},
	{"LoadForEventAgreesWithIsProcessed", loadForEvent},
	{"LoadForEventUnderCommits", loadForEventUnderCommits},
	{"LoadForEventRacingACreate", loadForEventRacesCreate},
	{"ProcessedEventIsRefused", processedEventRefused},
	{"ProcessedEventAtAStaleVersionIsRefused", processedEventAtStaleVersionRefused},
	{"UnprocessedEventAtAStaleVersionIsAConflict", unprocessedEventAtStaleVersionConflicts},
	{"ProcessedEventOnTheCreatePathIsRefused", processedEventOnCreateRefused},
	{"CommitWithoutAnEventIsNeverRefused", commitWithoutEventNeverRefused},
	{"CommitAfterARefusalSucceeds", commitAfterRefusalSucceeds},
	{"RacingRedeliveriesHaveOneWinner", racingRedeliveriesOneWinner},
	{"LoadsReturnTheLastCommit", loadsReturnTheLastCommit},
	{"LoadsReturnTheLastCommitConcurrently", loadsReturnTheLastCommitConcurrently},
	{"ConcurrentSavesHaveOneWinner", concurrentSavesOneWinner},
	{"ConcurrentCreatesHaveOneWinner", concurrentCreatesOneWinner},
	{"ConcurrentCommitsWriteOneOutboxEntry", concurrentCommitsOneOutboxEntry},
	{"RelayAcksWhileHandlersCommit", relayAcksWhileCommitting},
	{"Listing", listing},
	{"OddIdsRoundTrip", oddIdsRoundTrip},
	{"BadCommitInputIsInvalid", badCommitInput},
	{"BadCallInputIsInvalid", badCallInput},
	{"CommitPastLimitOnceEncodedIsInvalid", commitPastLimitEncoded},
	{"EndedContextDoesNothing", endedContext},
	{"CloseRefusesLaterCalls", closeRefuses},
}

var windowBehaviours = []windowBehaviour{
	{"TraceKeepsTheLastTraceMaxSteps", traceWindow},
	{"TraceWindowSkipsCommitsWithoutSteps", traceWindowSparse},
	{"DedupeWindowKeepsTheLastIds", dedupeWindow},
	{"DedupeGuardFollowsTheWindow", dedupeGuardWindow},
}

var bg = context.Background()

// newExe returns a new execution of definition "def", running, with a small snapshot.
func newExe(id string) *execstore.Execution {
	return &execstore.Execution{ID: id, DefinitionID: "def", Status: execstore.Running, Data: []byte(`{"n":0}`)}
}
