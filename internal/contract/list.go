package contract

import "github.com/execstore/execstore"

// The page sizes of execstore.ListQuery.Limit, as its field documents them.
const (
	// DefaultListLimit is the page size of a ListQuery with Limit 0.
	DefaultListLimit = 100
	// MaxListLimit is the largest page size List accepts.
	MaxListLimit = 10000
)

// Statuses returns every valid execstore.Status, in lifecycle order.
func Statuses() []execstore.Status {
	return []execstore.Status{execstore.Pending, execstore.Running, execstore.Done,
		execstore.Cancelled, execstore.Suspended, execstore.Cancelling, execstore.Failed}
}

// ValidStatus reports whether s is one of execstore's statuses.
func ValidStatus(s execstore.Status) bool {
	switch s {
	case execstore.Pending, execstore.Running, execstore.Done, execstore.Cancelled,
		execstore.Suspended, execstore.Cancelling, execstore.Failed:
		return true
	}
	return false
}
