// Package contract holds what every store of the module checks, orders and converts in the
// same way: the validation of a caller's input, refused with an *execstore.InvalidError
// (matching execstore.ErrInvalid) before any I/O, the order in which due timers are returned,
// and the one conversion of fire times between time.Time and the stored float64 seconds
// (StoredTime, TimeFromStored).
package contract

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// commitOverheadBytes is the room left for the document's own fields when a commit's payload
// alone is checked against MaxDocumentBytes.
const commitOverheadBytes = 16 * 1024

// DefaultTraceMax is how many trace steps an execution keeps by default, in every store.
const DefaultTraceMax = 200

// Invalid returns an *execstore.InvalidError for field.
func Invalid(field, format string, args ...any) error {
	return &execstore.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidateID checks an execution id, an event id or another key: non-empty, valid UTF-8, no
// NUL byte, at most execstore.MaxIDBytes.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return Invalid(field, "must not be empty")
	case len(id) > execstore.MaxIDBytes:
		return Invalid(field, "is %d bytes, more than the %d allowed", len(id), execstore.MaxIDBytes)
	case !utf8.ValidString(id):
		return Invalid(field, "is not valid UTF-8")
	case strings.IndexByte(id, 0) >= 0:
		return Invalid(field, "contains a NUL byte")
	}
	return nil
}

// ValidatePath checks a timer path. Any non-empty text of at most execstore.MaxIDBytes is accepted:
// paths are encoded before they become field names, so ".", "$" and NUL are fine.
func ValidatePath(field, path string) error {
	switch {
	case path == "":
		return Invalid(field, "must not be empty")
	case len(path) > execstore.MaxIDBytes:
		return Invalid(field, "is %d bytes, more than the %d allowed", len(path), execstore.MaxIDBytes)
	}
	return nil
}

// ValidateLimit checks a result limit: 0 (no limit, or the default) or positive.
func ValidateLimit(field string, limit int) error {
	if limit < 0 {
		return Invalid(field, "must not be negative, got %d", limit)
	}
	return nil
}

// TimerRefFields are the names ValidateTimerRef gives its three arguments in errors.
type TimerRefFields struct{ ID, Path, FireAt string }

// DeleteTimerFields names the arguments of DeleteTimer.
var DeleteTimerFields = TimerRefFields{ID: "id", Path: "path", FireAt: "fireAt"}

// ValidateTimerRef checks a reference to one timer, as DeleteTimer takes it: the execution id,
// the timer's path and the fire time it must still hold.
func ValidateTimerRef(f TimerRefFields, id, path string, fireAt time.Time) error {
	if err := ValidateID(f.ID, id); err != nil {
		return err
	}
	if err := ValidatePath(f.Path, path); err != nil {
		return err
	}
	return ValidateFireTime(f.FireAt, fireAt)
}

// ValidateDueTimers checks the timers given to DeleteTimers, each as DeleteTimer checks its
// arguments, and its Version not negative.
func ValidateDueTimers(timers []execstore.DueTimer) error {
	for i, t := range timers {
		p := fmt.Sprintf("timers[%d].", i)
		f := TimerRefFields{ID: p + "ExecutionID", Path: p + "Path", FireAt: p + "FireAt"}
		if err := ValidateTimerRef(f, t.ExecutionID, t.Path, t.FireAt); err != nil {
			return err
		}
		if t.Version < 0 {
			return Invalid(p+"Version", "is %d, negative", t.Version)
		}
	}
	return nil
}

// ValidateExecution checks everything a commit writes of exe itself.
func ValidateExecution(exe *execstore.Execution) error {
	if exe == nil {
		return Invalid("Execution", "must not be nil")
	}
	if err := ValidateID("Execution.ID", exe.ID); err != nil {
		return err
	}
	if exe.DefinitionID != "" {
		if err := ValidateID("Execution.DefinitionID", exe.DefinitionID); err != nil {
			return err
		}
	}
	if exe.ParentID != "" {
		if err := ValidateID("Execution.ParentID", exe.ParentID); err != nil {
			return err
		}
	}
	if !ValidStatus(exe.Status) {
		return Invalid("Execution.Status", "%q is not a known status", exe.Status)
	}
	if exe.Version < 0 {
		return Invalid("Execution.Version", "must not be negative, got %d", exe.Version)
	}
	if exe.TraceNext < 0 {
		return Invalid("Execution.TraceNext", "must not be negative, got %d", exe.TraceNext)
	}
	if len(exe.Data) > execstore.MaxDocumentBytes-commitOverheadBytes {
		return Invalid("Execution.Data", "is %d bytes; the whole document must stay below MongoDB's %d-byte limit",
			len(exe.Data), execstore.MaxDocumentBytes)
	}
	return nil
}

// ValidateCommit checks exe and c together, including their combined size.
func ValidateCommit(exe *execstore.Execution, c *execstore.Commit) error {
	if err := ValidateExecution(exe); err != nil {
		return err
	}
	size := len(exe.Data)
	for i, e := range c.Emits {
		if len(e.Event) == 0 {
			return Invalid(fmt.Sprintf("Commit.Emits[%d].Event", i), "must not be empty: an emit carries an event")
		}
		if e.TargetID != "" {
			if err := ValidateID(fmt.Sprintf("Commit.Emits[%d].TargetID", i), e.TargetID); err != nil {
				return err
			}
		}
		size += len(e.Event) + len(e.TargetID)
	}
	if c.ProcessedEventID != "" {
		if err := ValidateID("Commit.ProcessedEventID", c.ProcessedEventID); err != nil {
			return err
		}
		size += len(c.ProcessedEventID)
	}
	for i, t := range c.Timers {
		if err := ValidatePath(fmt.Sprintf("Commit.Timers[%d].Path", i), t.Path); err != nil {
			return err
		}
		size += len(t.Path) + 16
		if !t.Cancel {
			if err := ValidateFireTime(fmt.Sprintf("Commit.Timers[%d].FireAt", i), t.FireAt); err != nil {
				return err
			}
		}
	}
	for i, s := range c.Spawns {
		if err := ValidateID(fmt.Sprintf("Commit.Spawns[%d].ChildID", i), s.ChildID); err != nil {
			return err
		}
		if s.RootPath != "" {
			if err := ValidateID(fmt.Sprintf("Commit.Spawns[%d].RootPath", i), s.RootPath); err != nil {
				return err
			}
		}
		n, err := EncodedSize(fmt.Sprintf("Commit.Spawns[%d].Context", i), s.Context)
		if err != nil {
			return err
		}
		size += n + len(s.ChildID) + len(s.RootPath)
	}
	if c.Trace != nil {
		n, err := EncodedSize("Commit.Trace", c.Trace)
		if err != nil {
			return err
		}
		size += n
	}
	if size > execstore.MaxDocumentBytes-commitOverheadBytes {
		return Invalid("Commit", "carries %d bytes; the whole document must stay below MongoDB's %d-byte limit",
			size, execstore.MaxDocumentBytes)
	}
	return nil
}

// EncodedSize returns the BSON size of m, or an ErrInvalid naming field when BSON cannot
// encode it.
func EncodedSize(field string, m map[string]any) (int, error) {
	if m == nil {
		return 0, nil
	}
	b, err := bson.Marshal(m)
	if err != nil {
		return 0, Invalid(field, "cannot be encoded as BSON: %v", err)
	}
	return len(b), nil
}

// ValidateListQuery checks q's filters and limit (the cursor is checked when decoded).
func ValidateListQuery(q *execstore.ListQuery) error {
	for i, s := range q.Statuses {
		if !ValidStatus(s) {
			return Invalid(fmt.Sprintf("ListQuery.Statuses[%d]", i), "%q is not a known status", s)
		}
	}
	if q.DefinitionID != "" {
		if err := ValidateID("ListQuery.DefinitionID", q.DefinitionID); err != nil {
			return err
		}
	}
	if q.Limit < 0 || q.Limit > MaxListLimit {
		return Invalid("ListQuery.Limit", "must be between 0 and %d, got %d", MaxListLimit, q.Limit)
	}
	return nil
}

// SortDueTimers puts timers in the order DueTimers returns them: earliest fire time first,
// then by execution id, then by path.
func SortDueTimers(timers []execstore.DueTimer) {
	sort.Slice(timers, func(i, j int) bool {
		a, b := timers[i], timers[j]
		if c := a.FireAt.Compare(b.FireAt); c != 0 {
			return c < 0
		}
		if a.ExecutionID != b.ExecutionID {
			return a.ExecutionID < b.ExecutionID
		}
		return a.Path < b.Path
	})
}
