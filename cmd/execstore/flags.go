package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// common are the flags every command takes, before or after its name.
type common struct {
	uri        string
	embedded   string
	db         string
	collection string
	json       bool
	timeout    time.Duration
}

// defaultTimeout bounds a command's server work: connecting, and every read.
const defaultTimeout = 10 * time.Second

// register declares the common flags on fs, into c.
func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.uri, "uri", "", "the server's MongoDB `URI` (default $MONGODB_URI)")
	fs.StringVar(&c.embedded, "embedded", "", "start the embedded server on the data directory `DIR` instead of connecting to a URI")
	fs.StringVar(&c.db, "db", "execstore", "the database `NAME`")
	fs.StringVar(&c.collection, "collection", "", "the store's collection `NAME`, where it differs from the default "+
		"(executions, idempotency, journal)")
	fs.BoolVar(&c.json, "json", false, "print one JSON document, with stable field names, instead of text")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "give up after `D`: bounds connecting and every read")
}

// usageError is bad usage: the command prints it with the usage of cmd, or of the command
// group named group, or of the whole command when neither is set, and exits with status 2.
type usageError struct {
	msg   string
	cmd   *command
	group string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError of no command in particular.
func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// withCommand sets the command of a usageError that names none; other errors are returned
// as they are.
func withCommand(err error, cmd *command) error {
	var u *usageError
	if errors.As(err, &u) && u.cmd == nil {
		u.cmd = cmd
	}
	return err
}

// parseInterleaved parses fs's flags wherever they stand among args, so that
// `show ID -json` reads as `show -json ID`, and returns the other arguments in order.
// Everything after "--" is an argument.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// statusList is the repeatable -status flag: statuses, each flag one or a comma list,
// case-insensitive.
type statusList []execstore.Status

func (s *statusList) String() string {
	if s == nil {
		return ""
	}
	parts := make([]string, len(*s))
	for i, st := range *s {
		parts[i] = string(st)
	}
	return strings.Join(parts, ",")
}

func (s *statusList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		st := execstore.Status(strings.ToUpper(strings.TrimSpace(part)))
		if st == "" {
			continue
		}
		if !contract.ValidStatus(st) {
			names := make([]string, 0, 8)
			for _, known := range contract.Statuses() {
				names = append(names, string(known))
			}
			return fmt.Errorf("unknown status %q (one of %s)", part, strings.Join(names, ", "))
		}
		*s = append(*s, st)
	}
	return nil
}

// checkLimit refuses a -limit outside 1..max.
func checkLimit(limit, max int) error {
	if limit < 1 || limit > max {
		return usagef("-limit must be between 1 and %d, got %d", max, limit)
	}
	return nil
}

// flagSet reports whether the flag name was given on the command line of fs.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
