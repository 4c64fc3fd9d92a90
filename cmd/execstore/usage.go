package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// usageIntro is the top of the usage.
const usageIntro = `Usage: execstore [flags] COMMAND [flags] [ARG]

Shows what an execstore database holds, to answer "what happened to execution X?":
executions with their outbox, timers, spawns, trace and dedupe set; idempotency records;
the relays sharing the partitions; journal invocations. It only reads: it sends no write
command of any kind.
`

// usageOutro is the end of the usage.
const usageOutro = `
Exit status: 0 on success; 1 when the command fails (a bad URI, an unreachable server, an
unknown id or key); 2 on bad flags or arguments.
Run "execstore COMMAND -h" for a command's own flags, and "execstore idem -h" (or
journal -h) for each command of the group with its flags.
`

// writeUsage writes the whole command's usage.
func writeUsage(w io.Writer) {
	fmt.Fprint(w, usageIntro)
	fmt.Fprintln(w, "\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		name := c.name
		if c.args != "" {
			name += " " + c.args
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, c.summary)
	}
	_ = tw.Flush()
	writeCommonFlags(w)
	fmt.Fprint(w, usageOutro)
}

// writeCommandUsage writes the usage of one command.
func writeCommandUsage(w io.Writer, c *command) {
	line := "Usage: execstore " + c.name + " [flags]"
	if c.args != "" {
		line += " " + c.args
	}
	fmt.Fprintf(w, "%s\n\n%s\n", line, c.detail)
	if c.payloads {
		fmt.Fprintf(w, "\n%s\n", payloadHelp)
	}
	own := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(own)
	if hasFlags(own) {
		fmt.Fprintln(w, "\nFlags:")
		own.SetOutput(w)
		own.PrintDefaults()
	}
	writeCommonFlags(w)
	if c.collection != "" {
		fmt.Fprintf(w, "\nIts collection is %q unless -collection names another.\n", c.collection)
	}
}

// writeGroupUsage writes the usage of the command group named group: each of its commands
// with its summary and its own flags.
func writeGroupUsage(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: execstore %s SUBCOMMAND [flags] [ARG]\n\nCommands:\n", group)
	for _, c := range groupCommands(group) {
		name := c.name
		if c.args != "" {
			name += " " + c.args
		}
		fmt.Fprintf(w, "  %s  %s\n", name, c.summary)
		own := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(own)
		var flags strings.Builder
		own.SetOutput(&flags)
		own.PrintDefaults()
		for line := range strings.Lines(flags.String()) {
			fmt.Fprint(w, "  "+line)
		}
	}
	writeCommonFlags(w)
	fmt.Fprintf(w, "\nRun \"execstore %s SUBCOMMAND -h\" for a command's whole usage.\n", group)
}

// writeCommonFlags writes the flags every command takes.
func writeCommonFlags(w io.Writer) {
	fmt.Fprintln(w, "\nFlags of every command (before or after its name):")
	fs := flag.NewFlagSet("execstore", flag.ContinueOnError)
	new(common).register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// hasFlags reports whether fs declares any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
