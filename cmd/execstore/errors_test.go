package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUnknownIDs checks the errors for an id or key with no document: exit status 1, one
// line naming the database and collection read, nothing on standard output.
func TestUnknownIDs(t *testing.T) {
	f := populate(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "nope"}, `no execution "nope" in ` + f.db + ".executions"},
		{[]string{"show", "order-1", "-collection", "other"}, `no execution "order-1" in ` + f.db + ".other"},
		{[]string{"idem", "get", "nope"}, `no idempotency record "nope" in ` + f.db + ".idempotency"},
		{[]string{"journal", "show", "nope"}, `no invocation "nope" in ` + f.db + ".journal"},
	} {
		r := cli(t, append([]string{"-uri", srv.URI, "-db", f.db}, c.args...)...)
		require.Equal(t, result{stderr: "execstore: " + c.want + "\n", code: 1}, r, c.args)
	}
}

// TestUsageErrors checks bad flags and arguments: exit status 2, the error, then the usage
// of the command (or of the whole command) on standard error.
func TestUsageErrors(t *testing.T) {
	uri := []string{"-uri", "mongodb://127.0.0.1:1"} // never dialled: usage is checked first
	for _, c := range []struct {
		args  []string
		want  string // the first line
		usage string // the usage's first line
	}{
		{nil, "no command", "Usage: execstore [flags] COMMAND"},
		{[]string{"-nope"}, "flag provided but not defined: -nope", "Usage: execstore [flags] COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, "Usage: execstore [flags] COMMAND"},
		{[]string{"frobnicate", "order-1"}, `unknown command "frobnicate"`, "Usage: execstore [flags] COMMAND"},
		{[]string{"idem", "put"}, `unknown command "idem put"`, "Usage: execstore [flags] COMMAND"},
		{[]string{"idem"}, "idem takes a subcommand; got none", "Usage: execstore idem SUBCOMMAND [flags] [ARG]"},
		{[]string{"journal"}, "journal takes a subcommand; got none", "Usage: execstore journal SUBCOMMAND [flags] [ARG]"},
		{append([]string{"show"}, uri...), "show takes one argument, ID; got 0", "Usage: execstore show [flags] ID"},
		{append([]string{"show", "a", "b"}, uri...), "show takes one argument, ID; got 2", "Usage: execstore show [flags] ID"},
		{append([]string{"list", "x"}, uri...), `list takes no argument, got ["x"]`, "Usage: execstore list [flags]"},
		{append([]string{"list", "-limit", "0"}, uri...), "-limit must be between 1 and 10000, got 0", "Usage: execstore list [flags]"},
		{append([]string{"list", "-status", "running,bogus"}, uri...),
			`invalid value "running,bogus" for flag -status: unknown status "bogus" (one of PENDING, RUNNING, DONE, CANCELLED, SUSPENDED, CANCELLING, FAILED)`,
			"Usage: execstore list [flags]"},
		{append([]string{"idem", "list"}, uri...), "idem list takes one argument, PREFIX; got 0", "Usage: execstore idem list [flags] PREFIX"},
		{append([]string{"idem", "list", "a-", "-limit", "10001"}, uri...), "-limit must be between 1 and 10000, got 10001",
			"Usage: execstore idem list [flags] PREFIX"},
		{append([]string{"relays", "x"}, uri...), `relays takes no argument, got ["x"]`, "Usage: execstore relays [flags]"},
		{append([]string{"relays", "-lease-key", ""}, uri...), "-lease-key must not be empty", "Usage: execstore relays [flags]"},
		{append([]string{"show", "x", "-trace", "-1"}, uri...), "-trace must not be negative, got -1", "Usage: execstore show [flags] ID"},
		{append([]string{"outbox", "-limit", "x"}, uri...), `invalid value "x" for flag -limit: parse error`, "Usage: execstore outbox [flags]"},
		{append([]string{"timers", "-timeout", "0s"}, uri...), "-timeout must be positive, got 0s", "Usage: execstore timers [flags]"},
		{[]string{"list"}, "no server: give -uri URI, set MONGODB_URI, or give -embedded DIR", "Usage: execstore list [flags]"},
		{append([]string{"list", "-embedded", "/nowhere"}, uri...), "give -uri or -embedded, not both", "Usage: execstore list [flags]"},
	} {
		r := cli(t, c.args...)
		require.Equal(t, 2, r.code, "%q: %s", c.args, r.stderr)
		require.Empty(t, r.stdout)
		lines := strings.SplitN(r.stderr, "\n", 4)
		require.Equal(t, "execstore: "+c.want, lines[0], c.args)
		require.Equal(t, "", lines[1])
		require.True(t, strings.HasPrefix(lines[2], c.usage), "%q: usage %q", c.args, lines[2])
	}
}

// TestHelp checks -h: the usage on standard output, exit status 0.
func TestHelp(t *testing.T) {
	r := cli(t, "-h")
	require.Equal(t, 0, r.code)
	require.Empty(t, r.stderr)
	for _, want := range []string{"Usage: execstore [flags] COMMAND", "  show ID ", "  list ", "  outbox ", "  timers ",
		"  idem get KEY ", "  idem list PREFIX ", "  relays ", "  journal show ID ", "-uri URI", "-embedded DIR", "-timeout D", "Exit status"} {
		require.Contains(t, r.stdout, want)
	}
	r = cli(t, "show", "-h")
	require.Equal(t, 0, r.code)
	for _, want := range []string{"Usage: execstore show [flags] ID", "-trace N", "-dedupe", "-json", `Its collection is "executions"`} {
		require.Contains(t, r.stdout, want)
	}
	r = cli(t, "help", "outbox")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "when its commit was made (by the committer")
}

// TestGroupHelp checks -h, -help and --help after a command group's name, and the help
// command with it: the group's usage on standard output, each of its commands with its
// summary and its own flags, exit status 0. A command of the group given -h still prints
// its own usage.
func TestGroupHelp(t *testing.T) {
	for _, args := range [][]string{{"idem", "-h"}, {"idem", "-help"}, {"idem", "--help"}, {"help", "idem"}, {"-db", "x", "idem", "-h"}} {
		r := cli(t, args...)
		require.Equal(t, result{stdout: r.stdout, code: 0}, r, args)
		for _, want := range []string{"Usage: execstore idem SUBCOMMAND [flags] [ARG]\n", "\n  idem get KEY  one idempotency record\n",
			"-body", "print the stored response's body", "Flags of every command", "-uri URI", `Run "execstore idem SUBCOMMAND -h"`} {
			require.Contains(t, r.stdout, want, args)
		}
		require.NotContains(t, r.stdout, "journal show", args)
		require.NotContains(t, r.stdout, "show ID", args)
	}
	r := cli(t, "journal", "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "Usage: execstore journal SUBCOMMAND [flags] [ARG]\n")
	require.Contains(t, r.stdout, "\n  journal show ID  one journal invocation's metadata, never its sealed payloads\n")
	require.NotContains(t, r.stdout, "idem get")

	r = cli(t, "idem", "get", "-h")
	require.Equal(t, result{stdout: r.stdout, code: 0}, r)
	require.True(t, strings.HasPrefix(r.stdout, "Usage: execstore idem get [flags] KEY\n\nPrints the record of KEY"), r.stdout)
}

// TestGroupsFromNames checks that every command group is found from the commands' names
// alone: each first word shared by commands of more than one word prints a usage listing
// each of them.
func TestGroupsFromNames(t *testing.T) {
	groups := map[string][]string{}
	for _, c := range commands {
		if first, _, more := strings.Cut(c.name, " "); more {
			groups[first] = append(groups[first], c.name)
		}
	}
	require.Contains(t, groups, "idem")
	require.Contains(t, groups, "journal")
	for group, names := range groups {
		r := cli(t, group, "-h")
		require.Equal(t, 0, r.code, group)
		for _, name := range names {
			require.Contains(t, r.stdout, "\n  "+name, group)
		}
		require.Equal(t, r.stdout, cli(t, "help", group).stdout, group)
		bare := cli(t, group)
		require.Equal(t, 2, bare.code, group)
		require.Equal(t, "execstore: "+group+" takes a subcommand; got none\n\n"+r.stdout, bare.stderr, group)
	}
}

// TestConnectionErrors checks a bad URI, an unreachable server and a missing data
// directory: exit status 1, the address named, the credentials never, and an unreachable
// server given up on within -timeout.
func TestConnectionErrors(t *testing.T) {
	const password, user = "s3cr3t-pw%21", "operator"
	bad := cli(t, "-uri", "mongodb://"+user+":"+password+"@db.example:27017/?connectTimeoutMS=soon", "list")
	require.Equal(t, 1, bad.code)
	require.Empty(t, bad.stdout)
	require.True(t, strings.HasPrefix(bad.stderr, "execstore: bad URI for db.example:27017: "), bad.stderr)

	scheme := cli(t, "-uri", "http://"+user+":"+password+"@db.example:27017", "list")
	require.Equal(t, 1, scheme.code)
	require.True(t, strings.HasPrefix(scheme.stderr, "execstore: bad URI for db.example:27017: "), scheme.stderr)

	start := time.Now()
	down := cli(t, "-uri", "mongodb://"+user+":"+password+"@127.0.0.1:1/?authSource=admin", "-timeout", "300ms", "show", "x")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 1, down.code)
	require.Empty(t, down.stdout)
	require.True(t, strings.HasPrefix(down.stderr, "execstore: server at 127.0.0.1:1 not reachable within 300ms: "), down.stderr)

	for _, r := range []result{bad, scheme, down} {
		for _, secret := range []string{password, "s3cr3t-pw!", user} {
			require.NotContains(t, r.stderr, secret)
		}
	}

	missing := cli(t, "-embedded", t.TempDir()+"/none", "list")
	require.Equal(t, 1, missing.code)
	require.Contains(t, missing.stderr, "no such data directory")
}

// TestURIFromEnvironment checks that $MONGODB_URI names the server when -uri does not.
func TestURIFromEnvironment(t *testing.T) {
	f := populate(t)
	r := runWith(t, srv.URI, nil, "-db", f.db, "list", "-roots")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 executions; last page")
}
