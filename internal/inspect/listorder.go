package inspect

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/ops"
)

// The order of a listing of executions and its cursor. In id order a page resumes after an
// id, with the cursor execstore.Store.List returns. In created or updated order several
// executions may share a time, and some have none (written before the store stamped it), so
// a page resumes after a keyset, (time, _id), and the listing is sorted on both:
//
//	ascending:  no time first, by _id; then by time, then _id
//	descending: by time, then _id, both descending; then no time, by _id descending
//
// as MongoDB sorts a missing field, below any date. The keyset's filter selects exactly the
// documents after it in that order, so a listing paged to its end returns each execution
// that stays put once, whatever the page size. An execution that commits meanwhile moves in
// updated order, as in any keyset listing: a later page may show it again, or skip it.

// ListSort is the order of a listing of executions.
type ListSort string

// The orders of a listing.
const (
	SortByID      ListSort = "id"      // by execution id, the default
	SortByCreated ListSort = "created" // by ops.FieldCreatedAt, then id
	SortByUpdated ListSort = "updated" // by ops.FieldUpdatedAt, then id
)

// ListSorts are the orders there are, the default first.
func ListSorts() []ListSort { return []ListSort{SortByID, SortByCreated, SortByUpdated} }

// ParseListSort reads an order by its name; "" is SortByID.
func ParseListSort(s string) (ListSort, error) {
	switch ListSort(strings.ToLower(strings.TrimSpace(s))) {
	case "", SortByID:
		return SortByID, nil
	case SortByCreated:
		return SortByCreated, nil
	case SortByUpdated:
		return SortByUpdated, nil
	}
	return "", &QueryError{fmt.Sprintf("unknown order %q: id, created or updated", s)}
}

// byTime reports whether s orders by a time rather than by id.
func (s ListSort) byTime() bool { return s == SortByCreated || s == SortByUpdated }

// field is the document field s orders by (then by _id).
func (s ListSort) field() string {
	switch s {
	case SortByCreated:
		return ops.FieldCreatedAt
	case SortByUpdated:
		return ops.FieldUpdatedAt
	}
	return idField
}

// QueryError is a query a listing cannot run: an unknown order, or a cursor of another.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// keyset is an execution's place in a listing by time: its time, in milliseconds since the
// epoch (nil when it has none), and its id.
type keyset struct {
	Sort ListSort `json:"s"`
	Desc bool     `json:"d,omitempty"`
	At   *int64   `json:"t,omitempty"`
	ID   string   `json:"id"`
}

// keysetPrefix tells a keyset cursor from an id cursor (contract.EncodeCursor's first byte is
// 1).
const keysetPrefix = "k"

// encode is the cursor that resumes a listing in order s (descending: desc) after k.
func (k keyset) encode(s ListSort, desc bool) string {
	k.Sort, k.Desc = s, desc
	b, _ := json.Marshal(k) // never fails: plain fields
	return base64.RawURLEncoding.EncodeToString(append([]byte(keysetPrefix), b...))
}

// decodeKeyset reads a cursor encode wrote for order s (descending: desc); anything else is
// a *QueryError.
func decodeKeyset(c string, s ListSort, desc bool) (keyset, error) {
	var k keyset
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), keysetPrefix) ||
		json.Unmarshal(b[len(keysetPrefix):], &k) != nil || k.ID == "" {
		return keyset{}, &QueryError{fmt.Sprintf("%q is not a cursor of a listing by %s", c, s)}
	}
	if k.Sort != s || k.Desc != desc {
		order := func(s ListSort, desc bool) string {
			if desc {
				return string(s) + " descending"
			}
			return string(s) + " ascending"
		}
		return keyset{}, &QueryError{fmt.Sprintf("the cursor resumes a listing by %s, not by %s: start again from the first page",
			order(k.Sort, k.Desc), order(s, desc))}
	}
	return k, nil
}

// after is the filter of the documents after k in the order by field (see the table above).
func (k keyset) after(field string, desc bool) bson.E {
	none := bson.E{Key: field, Value: nil} // matches a missing field
	cmp := "$gt"
	if desc {
		cmp = "$lt"
	}
	idAfter := bson.E{Key: idField, Value: bson.D{{Key: cmp, Value: k.ID}}}
	if k.At == nil {
		branches := bson.A{bson.D{none, idAfter}}
		if !desc { // every document with a time comes after those without
			branches = append(branches, bson.D{{Key: field, Value: bson.D{{Key: "$type", Value: "date"}}}})
		}
		return bson.E{Key: "$or", Value: branches}
	}
	at := time.UnixMilli(*k.At).UTC()
	branches := bson.A{
		bson.D{{Key: field, Value: bson.D{{Key: cmp, Value: at}}}},
		bson.D{{Key: field, Value: at}, idAfter},
	}
	if desc { // every document without a time comes after those with one
		branches = append(branches, bson.D{none})
	}
	return bson.E{Key: "$or", Value: branches}
}
