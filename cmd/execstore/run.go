package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed: bad URI, unreachable server, unknown id, …
	exitUsage = 2 // bad flags or arguments
)

// environment is what a run takes from its process; the tests give their own.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// clientOptions are applied after the URI (the tests set a command monitor); nil for none.
	clientOptions *options.ClientOptions
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, env environment) int {
	inv, err := parse(args, env)
	var help *helpRequest
	var usage *usageError
	switch {
	case errors.As(err, &help):
		switch {
		case help.cmd != nil:
			writeCommandUsage(env.stdout, help.cmd)
		case help.group != "":
			writeGroupUsage(env.stdout, help.group)
		default:
			writeUsage(env.stdout)
		}
		return exitOK
	case errors.As(err, &usage):
		return usageFailure(env.stderr, usage)
	case err != nil:
		return failure(env.stderr, err)
	}

	bounded, cancel := context.WithTimeout(ctx, inv.common.timeout)
	defer cancel()
	sess, err := openSession(bounded, inv.conn)
	if err != nil {
		return failure(env.stderr, err)
	}
	if !inv.serves {
		ctx = bounded // a server bounds each request instead
	}
	err = inv.run(ctx, sess.client.Database(inv.common.db), env.stdout)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (-timeout %v)", err, inv.common.timeout)
	}
	if err = errors.Join(err, sess.close()); err != nil {
		return failure(env.stderr, err)
	}
	return exitOK
}

// invocation is a command line parsed and checked: what to run, and where.
type invocation struct {
	common common
	run    runner
	conn   connection
	serves bool // it runs until interrupted: -timeout bounds connecting and each request
}

// helpRequest is -h, -help or the help command: print the usage of cmd, or of the command
// group named group ("idem"), or of the whole command when neither is set.
type helpRequest struct {
	cmd   *command
	group string
}

func (*helpRequest) Error() string { return "help requested" }

// parse reads the command line: the common flags, the command's name, then its flags (the
// common ones too) and arguments in any order. Bad usage is a *usageError.
func parse(args []string, env environment) (*invocation, error) {
	inv := &invocation{}
	top := flag.NewFlagSet("execstore", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	inv.common.register(top)
	if err := top.Parse(args); err != nil {
		return nil, flagError(err, nil)
	}
	rest := top.Args()
	if len(rest) == 0 {
		return nil, usagef("no command")
	}
	if rest[0] == "help" {
		if cmd, _, ok := lookupCommand(rest[1:]); ok {
			return nil, &helpRequest{cmd: cmd}
		}
		if len(rest) > 1 && len(groupCommands(rest[1])) > 0 {
			return nil, &helpRequest{group: rest[1]}
		}
		return nil, &helpRequest{}
	}
	cmd, cmdArgs, ok := lookupCommand(rest)
	if !ok {
		if len(groupCommands(rest[0])) > 0 {
			switch {
			case len(rest) == 1:
				return nil, &usageError{msg: rest[0] + " takes a subcommand; got none", group: rest[0]}
			case isHelpFlag(rest[1]):
				return nil, &helpRequest{group: rest[0]}
			}
		}
		return nil, usagef("unknown command %q", commandWords(rest))
	}

	fs := flag.NewFlagSet("execstore "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	new(common).register(fs) // the common flags given after the command's name, copied below
	bind := cmd.setup(fs)
	positional, err := parseInterleaved(fs, cmdArgs)
	if err != nil {
		return nil, flagError(err, cmd)
	}
	fs.Visit(func(f *flag.Flag) {
		if top.Lookup(f.Name) != nil {
			_ = top.Set(f.Name, f.Value.String()) // a value the same flag just accepted
		}
	})
	if err := checkArgs(cmd, positional); err != nil {
		return nil, err
	}
	c := &inv.common
	collection := c.collection
	if collection == "" {
		collection = cmd.collection
	}
	out := output{JSON: c.json, Now: env.now().UTC(), clock: env.now, getenv: env.getenv, timeout: c.timeout, stderr: env.stderr}
	inv.serves = cmd.serves
	if inv.run, err = bind(positional, out, collection); err != nil {
		return nil, withCommand(err, cmd)
	}
	if inv.conn, err = c.connection(env); err != nil {
		return nil, withCommand(err, cmd)
	}
	return inv, nil
}

// checkArgs checks the number of arguments cmd was given, and that none is empty.
func checkArgs(cmd *command, positional []string) error {
	switch {
	case len(positional) == cmd.nargs():
	case cmd.nargs() == 0:
		return withCommand(usagef("%s takes no argument, got %q", cmd.name, positional), cmd)
	default:
		return withCommand(usagef("%s takes one argument, %s; got %d", cmd.name, cmd.args, len(positional)), cmd)
	}
	for _, a := range positional {
		if a == "" {
			return withCommand(usagef("%s must not be empty", cmd.args), cmd)
		}
	}
	return nil
}

// commandWords is the unknown command's name, for the error: its first word, and the
// second when the first names a command group (idem, journal).
func commandWords(rest []string) string {
	if len(rest) > 1 && len(groupCommands(rest[0])) > 0 {
		return rest[0] + " " + rest[1]
	}
	return rest[0]
}

// isHelpFlag reports whether arg asks for help as the flag package reads it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// flagError is a flag package error as a helpRequest or a usageError of cmd.
func flagError(err error, cmd *command) error {
	if errors.Is(err, flag.ErrHelp) {
		return &helpRequest{cmd: cmd}
	}
	return &usageError{msg: err.Error(), cmd: cmd}
}

// connection resolves where to read: -embedded, or -uri, or $MONGODB_URI.
func (c *common) connection(env environment) (connection, error) {
	if c.timeout <= 0 {
		return connection{}, usagef("-timeout must be positive, got %v", c.timeout)
	}
	if c.db == "" {
		return connection{}, usagef("-db must not be empty")
	}
	conn := connection{URI: c.uri, EmbeddedDir: c.embedded, Timeout: c.timeout, ClientOptions: env.clientOptions}
	switch {
	case c.embedded != "" && c.uri != "":
		return connection{}, usagef("give -uri or -embedded, not both")
	case c.embedded != "":
	case c.uri == "":
		conn.URI = env.getenv("MONGODB_URI")
		if conn.URI == "" {
			return connection{}, usagef("no server: give -uri URI, set MONGODB_URI, or give -embedded DIR")
		}
	}
	return conn, nil
}

// failure prints a command's error and returns exitError.
func failure(w io.Writer, err error) int {
	fmt.Fprintf(w, "execstore: %s\n", err)
	return exitError
}

// usageFailure prints bad usage with the usage of its command or command group (of the
// whole command when it has neither) and returns exitUsage.
func usageFailure(w io.Writer, err *usageError) int {
	fmt.Fprintf(w, "execstore: %s\n\n", err.msg)
	switch {
	case err.cmd != nil:
		writeCommandUsage(w, err.cmd)
	case err.group != "":
		writeGroupUsage(w, err.group)
	default:
		writeUsage(w)
	}
	return exitUsage
}
