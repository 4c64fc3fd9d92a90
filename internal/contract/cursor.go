package contract

import (
	"encoding/base64"

	"github.com/execstore/execstore"
)

// ListPage returns where a listing of q resumes (the id after which, "" from the start) and
// how many summaries its page holds (Limit, or DefaultListLimit for 0); a cursor List did not
// return is ErrInvalid.
func ListPage(q execstore.ListQuery) (after string, limit int, err error) {
	if after, err = DecodeCursor(q.Cursor); err != nil {
		return "", 0, err
	}
	limit = q.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	return after, limit, nil
}

// A list cursor is the id a listing resumes after, encoded so that it is opaque: the same
// codec for every store, so that a cursor means the same thing whichever store returned it.

// cursorVersion is the first byte of every list cursor, so a format change can be detected.
const cursorVersion = 1

// EncodeCursor returns the opaque cursor that resumes a listing after id.
func EncodeCursor(afterID string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion}, afterID...))
}

// DecodeCursor returns the id a cursor resumes after ("" for the empty cursor), or an
// ErrInvalid naming ListQuery.Cursor for anything EncodeCursor cannot have produced.
func DecodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != cursorVersion {
		return "", Invalid("ListQuery.Cursor", "is not a cursor returned by List")
	}
	id := string(b[1:])
	// The decoder skips newlines and tolerates stray padding bits; only the canonical form
	// of a cursor is one.
	if ValidateID("ListQuery.Cursor", id) != nil || EncodeCursor(id) != c {
		return "", Invalid("ListQuery.Cursor", "is not a cursor returned by List")
	}
	return id, nil
}
