package contract

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/execstore/execstore"
)

// ValidateItemRef checks an execstore.ItemRef: a known kind, an execution id, and a timer's
// path and fire time.
func ValidateItemRef(ref execstore.ItemRef) error {
	switch ref.Kind {
	case execstore.OutboxItem, execstore.SpawnItem:
	case execstore.TimerItem:
		if err := ValidatePath("ItemRef.Path", ref.Path); err != nil {
			return err
		}
		if err := ValidateFireTime("ItemRef.FireAt", ref.FireAt); err != nil {
			return err
		}
	default:
		return Invalid("ItemRef.Kind", "is %q, not one of %q, %q, %q", ref.Kind, execstore.OutboxItem, execstore.SpawnItem, execstore.TimerItem)
	}
	return ValidateID("ItemRef.ExecutionID", ref.ExecutionID)
}

// ValidateFailure checks an execstore.Failure: it has a time, and MaxAttempts is not
// negative.
func ValidateFailure(f execstore.Failure) error {
	if f.At.IsZero() {
		return Invalid("Failure.At", "must be set")
	}
	if f.MaxAttempts < 0 {
		return Invalid("Failure.MaxAttempts", "is %d, negative", f.MaxAttempts)
	}
	return nil
}

// Dies reports whether a failure f that brings an item's recorded attempts to count moves
// it to dead: f.Dead, or f.MaxAttempts positive and reached.
func Dies(f execstore.Failure, count int) bool {
	return f.Dead || f.MaxAttempts > 0 && count >= f.MaxAttempts
}

// FailureText is the text a store keeps of a failure: at most execstore.MaxFailureBytes,
// cut on a UTF-8 boundary, invalid UTF-8 replaced.
func FailureText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= execstore.MaxFailureBytes {
		return s
	}
	cut := execstore.MaxFailureBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// ValidateDeadQuery checks q and fills in its defaults: the limit (0 means 100, at most
// 10,000) and the kinds (empty means every kind).
func ValidateDeadQuery(q *execstore.DeadQuery) error {
	for _, k := range q.Kinds {
		if k != execstore.OutboxItem && k != execstore.SpawnItem && k != execstore.TimerItem {
			return Invalid("DeadQuery.Kinds", "holds %q, not one of %q, %q, %q", k, execstore.OutboxItem, execstore.SpawnItem, execstore.TimerItem)
		}
	}
	if q.ExecutionID != "" {
		if err := ValidateID("DeadQuery.ExecutionID", q.ExecutionID); err != nil {
			return err
		}
	}
	switch {
	case q.Limit < 0:
		return Invalid("DeadQuery.Limit", "must not be negative, got %d", q.Limit)
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit > 10000:
		return Invalid("DeadQuery.Limit", "is %d, more than 10000", q.Limit)
	}
	if _, err := DecodeDeadCursor(q.Cursor); err != nil {
		return err
	}
	return nil
}

// DeadKey is a dead item's place in the order of a dead listing: execution id, kind, then
// seq, or path and fire time.
type DeadKey struct {
	ExecutionID string
	Kind        execstore.ItemKind
	Seq         int64
	Path        string
	At          float64 // a timer's fire time, as stored (StoredTime)
}

// KeyOf is ref's DeadKey: only the fields of its kind count.
func KeyOf(ref execstore.ItemRef) DeadKey {
	if ref.Kind == execstore.TimerItem {
		return DeadKey{ExecutionID: ref.ExecutionID, Kind: ref.Kind, Path: ref.Path, At: StoredTime(ref.FireAt)}
	}
	return DeadKey{ExecutionID: ref.ExecutionID, Kind: ref.Kind, Seq: ref.Seq}
}

// NormalRef is ref with only the fields of its kind, a timer's fire time as the store holds
// it.
func NormalRef(ref execstore.ItemRef) execstore.ItemRef {
	if ref.Kind == execstore.TimerItem {
		at, _ := TimeFromStored(StoredTime(ref.FireAt))
		return execstore.ItemRef{Kind: ref.Kind, ExecutionID: ref.ExecutionID, Path: ref.Path, FireAt: at}
	}
	return execstore.ItemRef{Kind: ref.Kind, ExecutionID: ref.ExecutionID, Seq: ref.Seq}
}

// kindRank orders the kinds: outbox, spawn, timer.
func kindRank(k execstore.ItemKind) int {
	switch k {
	case execstore.OutboxItem:
		return 0
	case execstore.SpawnItem:
		return 1
	}
	return 2
}

// Compare orders two keys as a dead listing does.
func (a DeadKey) Compare(b DeadKey) int {
	if c := strings.Compare(a.ExecutionID, b.ExecutionID); c != 0 {
		return c
	}
	if c := kindRank(a.Kind) - kindRank(b.Kind); c != 0 {
		return c
	}
	if a.Kind == execstore.TimerItem {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	}
	switch {
	case a.Seq < b.Seq:
		return -1
	case a.Seq > b.Seq:
		return 1
	}
	return 0
}

// EncodeDeadCursor returns the opaque cursor that resumes a dead listing after k.
func EncodeDeadCursor(k DeadKey) string {
	return EncodeCursor(fmt.Sprintf("%s\x1f%d\x1f%s\x1f%d\x1f%s%s", k.Kind, k.Seq,
		strconv.FormatFloat(k.At, 'g', -1, 64), len(k.ExecutionID), k.ExecutionID, k.Path))
}

// DecodeDeadCursor returns the key a cursor resumes after (the zero key for ""), or an
// ErrInvalid naming DeadQuery.Cursor.
func DecodeDeadCursor(c string) (DeadKey, error) {
	if c == "" {
		return DeadKey{}, nil
	}
	bad := Invalid("DeadQuery.Cursor", "is not a cursor returned by ListDead")
	s, err := DecodeCursor(c)
	if err != nil {
		return DeadKey{}, bad
	}
	parts := strings.SplitN(s, "\x1f", 5)
	if len(parts) != 5 {
		return DeadKey{}, bad
	}
	seq, err1 := strconv.ParseInt(parts[1], 10, 64)
	at, err2 := strconv.ParseFloat(parts[2], 64)
	n, err3 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || n < 0 || n > len(parts[4]) {
		return DeadKey{}, bad
	}
	return DeadKey{ExecutionID: parts[4][:n], Kind: execstore.ItemKind(parts[0]), Seq: seq, At: at, Path: parts[4][n:]}, nil
}
