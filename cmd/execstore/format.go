package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/execstore/execstore/internal/inspect"
)

// Output formatting: every command builds a report (a struct with stable JSON field names)
// and writes it either as one indented JSON document (-json) or as aligned text for people,
// in a stable order. Text output quotes any stored string that holds a tab, a newline, a
// control character or anything else unprintable, so that a stored string can neither break
// the alignment nor send escape sequences to the terminal.

// output is how a command prints and what it measures relative times from.
type output struct {
	JSON bool      // one JSON document instead of text
	Now  time.Time // the application's now: timers are due at or before it
	// What ui, which answers requests for as long as it runs, reads at each: the clock, the
	// environment and the bound of one request's reads (-timeout).
	clock   func() time.Time
	getenv  func(string) string
	timeout time.Duration
	// stderr takes the log lines of the commands that write (revive, discard).
	stderr io.Writer
}

// emit writes r as o asks: as the report's JSON (inspect.WriteJSON), or as text for people.
func emit[R any](w io.Writer, o output, r R, text func(io.Writer, R) error) error {
	if o.JSON {
		return inspect.WriteJSON(w, r)
	}
	return text(w, r)
}

// The relative times of text output, as package inspect writes them.
var (
	relative        = inspect.Relative        // "in 16m40s", "3d4h ago", "now"
	relativeSeconds = inspect.RelativeSeconds // relative, for a distance in seconds
	relativeTo      = inspect.RelativeTo      // relative, for two times as formatTime writes them
)

// plain returns s for text output: as it is when it is non-empty and every rune is printable
// and not a space other than ' ', else quoted.
func plain(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// orDash returns plain(s), or "-" for "".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return plain(s)
}

// yesNo is a bool for text output.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// plural returns "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// pairs writes label/value lines, the values aligned.
func pairs(w io.Writer, indent string, kv [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range kv {
		fmt.Fprintf(tw, "%s%s\t%s\n", indent, p[0], p[1])
	}
	return tw.Flush()
}

// table writes a header and rows in aligned columns, trailing spaces trimmed.
func table(w io.Writer, indent string, header []string, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		fmt.Fprintf(tw, "%s%s\n", indent, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// payloadHelp says, for the commands' help, what each kind of payload looks like in -json.
const payloadHelp = `With -json, a snapshot, an outbox event and a response body have one shape:
{"bytes": N, "kind": K, ...}. A JSON payload (kind "json") is its value under "json"; a BSON
document (kind "bson") is a JSON object under "json" (extended JSON for values JSON cannot
hold). Other payloads are not documents: UTF-8 text (kind "text") is a string under "text";
anything else (kind "binary") is base64 under "base64", left out past 1024 bytes; no bytes
is kind "empty". Fields that are absent (no parent, no target, a kind's other fields) are
left out.`
