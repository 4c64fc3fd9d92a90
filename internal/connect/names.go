package connect

import (
	"strings"

	"github.com/execstore/execstore/internal/contract"
)

// MongoDB's naming rules, as its manual's "Naming Restrictions" states them. A database name
// is refused if any deployment would refuse it: the characters forbidden on Windows are the
// union of those forbidden on Windows and on Unix.
const (
	// maxDatabaseBytes: a database name must have fewer than 64 bytes.
	maxDatabaseBytes = 63
	// maxNamespaceBytes bounds a namespace, "<database>.<collection>", since MongoDB 4.4.
	maxNamespaceBytes = 255
	// databaseForbidden are the characters no database name may hold, NUL included.
	databaseForbidden = "/\\. \"$*<>:|?\x00"
)

// CheckDatabaseName refuses, as an *execstore.InvalidError for field, a database name the
// server would refuse.
func CheckDatabaseName(field, name string) error {
	switch {
	case name == "":
		return contract.Invalid(field, "must not be empty")
	case len(name) > maxDatabaseBytes:
		return contract.Invalid(field, "is %d bytes; MongoDB takes database names of at most %d bytes", len(name), maxDatabaseBytes)
	}
	if i := strings.IndexAny(name, databaseForbidden); i >= 0 {
		return contract.Invalid(field, "%q holds %q, which MongoDB refuses in a database name (none of %q nor NUL)",
			name, name[i], strings.TrimSuffix(databaseForbidden, "\x00"))
	}
	return nil
}

// CheckCollectionName refuses, as an *execstore.InvalidError for field, a collection name the
// server would refuse in database.
func CheckCollectionName(field, database, name string) error {
	switch {
	case name == "":
		return contract.Invalid(field, "must not be empty")
	case strings.ContainsRune(name, '$'):
		return contract.Invalid(field, "%q holds \"$\", which MongoDB refuses in a collection name", name)
	case strings.ContainsRune(name, 0):
		return contract.Invalid(field, "%q holds a NUL byte, which MongoDB refuses in a collection name", name)
	case strings.HasPrefix(name, "system.") || strings.Contains(name, ".system."):
		return contract.Invalid(field, "%q is in MongoDB's system namespace (\"system.\" is reserved)", name)
	case strings.HasPrefix(name, "."):
		return contract.Invalid(field, "%q starts with \".\", which MongoDB refuses", name)
	case len(database)+1+len(name) > maxNamespaceBytes:
		return contract.Invalid(field, "makes the namespace %q.%q %d bytes; MongoDB takes at most %d",
			database, name, len(database)+1+len(name), maxNamespaceBytes)
	}
	return nil
}
