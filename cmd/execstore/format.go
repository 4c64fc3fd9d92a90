package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// Output formatting: every command builds a report (a struct with stable JSON field names)
// and writes it either as one indented JSON document (-json) or as aligned text for people,
// in a stable order. Text output quotes any stored string that holds a tab, a newline, a
// control character or anything else unprintable, so that a stored string can neither break
// the alignment nor send escape sequences to the terminal.

// report is what a command prints.
type report interface {
	// writeText writes the report for people.
	writeText(w io.Writer) error
}

// output is how a command prints and what it measures relative times from.
type output struct {
	JSON bool      // one JSON document instead of text
	Now  time.Time // the application's now: timers are due at or before it
}

// emit writes r as o asks.
func emit(w io.Writer, o output, r report) error {
	if !o.JSON {
		return r.writeText(w)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// formatTime returns t as RFC 3339 in UTC, with three digits of milliseconds when it has
// any (times the server stamps), without when it has none (fire times in whole seconds).
func formatTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/int(time.Millisecond) != 0 {
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Format(time.RFC3339)
}

// relative says how far t is from now: "in 16m40s", "3d4h ago", "now".
func relative(t, now time.Time) string { return fromNow(t.Sub(now)) }

// relativeSeconds is relative for a distance in seconds.
func relativeSeconds(s float64) string { return fromNow(time.Duration(s * float64(time.Second))) }

// fromNow says how far from now a time d away is.
func fromNow(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + shortDuration(d)
	default:
		return shortDuration(-d) + " ago"
	}
}

// shortDuration writes a duration of whole seconds in its largest unit and the next one,
// the rest dropped: "16m40s", "2h", "3d4h" (for 3d4h12m), "45s".
func shortDuration(d time.Duration) string {
	units := []struct {
		name string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}}
	for i, u := range units {
		if d < u.size {
			continue
		}
		s := strconv.FormatInt(int64(d/u.size), 10) + u.name
		if i+1 < len(units) {
			next := units[i+1]
			if n := d % u.size / next.size; n > 0 {
				s += strconv.FormatInt(int64(n), 10) + next.name
			}
		}
		return s
	}
	return "0s"
}

// seconds is a duration in seconds, for JSON.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

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

// The kinds of payload a report tells apart.
const (
	kindEmpty  = "empty"
	kindJSON   = "json"
	kindBSON   = "bson"
	kindText   = "text"
	kindBinary = "binary"
)

// payload is opaque bytes shown whole, in one shape wherever they are stored (a snapshot, an
// outbox event, a response body): JSON as its value and a BSON document as a JSON object
// (both under "json"), other UTF-8 text as a string ("text"), anything else as base64
// ("base64") up to maxBase64 bytes, past which only its size is shown. Fields a kind does not
// have are left out.
type payload struct {
	Bytes  int             `json:"bytes"`
	Kind   string          `json:"kind"` // empty, json, bson, text or binary
	JSON   json.RawMessage `json:"json,omitempty"`
	Text   *string         `json:"text,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

// payloadHelp says, for the commands' help, what each kind of payload looks like in -json.
const payloadHelp = `With -json, a snapshot, an outbox event and a response body have one shape:
{"bytes": N, "kind": K, ...}. A JSON payload (kind "json") is its value under "json"; a BSON
document (kind "bson") is a JSON object under "json" (extended JSON for values JSON cannot
hold). Other payloads are not documents: UTF-8 text (kind "text") is a string under "text";
anything else (kind "binary") is base64 under "base64", left out past 1024 bytes; no bytes
is kind "empty". Fields that are absent (no parent, no target, a kind's other fields) are
left out.`

// maxBase64 is the largest binary payload shown (as base64); larger ones show their size.
const maxBase64 = 1024

// describePayload classifies b and keeps what the report shows of it.
func describePayload(b []byte) payload {
	p := payload{Bytes: len(b), Kind: classify(b)}
	switch p.Kind {
	case kindJSON:
		var c bytes.Buffer
		_ = json.Compact(&c, b) // valid: classify checked
		p.JSON = c.Bytes()
	case kindBSON:
		p.JSON = bsonFields(b)
	case kindText:
		s := string(b)
		p.Text = &s
	case kindBinary:
		if len(b) <= maxBase64 {
			p.Base64 = base64.StdEncoding.EncodeToString(b)
		}
	}
	return p
}

// text writes the payload on one line.
func (p payload) text() string {
	switch p.Kind {
	case kindEmpty:
		return "0 bytes"
	case kindJSON:
		return fmt.Sprintf("%s, JSON: %s", plural(p.Bytes, "byte", "bytes"), p.JSON)
	case kindBSON:
		return fmt.Sprintf("%s, BSON: %s", plural(p.Bytes, "byte", "bytes"), p.JSON)
	case kindText:
		return fmt.Sprintf("%s, text: %s", plural(p.Bytes, "byte", "bytes"), strconv.Quote(*p.Text))
	}
	if p.Base64 == "" {
		return fmt.Sprintf("%s, binary (not shown past %d bytes)", plural(p.Bytes, "byte", "bytes"), maxBase64)
	}
	return fmt.Sprintf("%s, binary, base64: %s", plural(p.Bytes, "byte", "bytes"), p.Base64)
}

// preview is the start of opaque bytes, for a table row of text output (an outbox event);
// -json shows the whole payload.
type preview struct {
	Bytes     int
	Kind      string // a payload's kinds; binary is previewed as base64
	Preview   string
	Truncated bool
}

// previewRunes is how much of a payload a preview shows: runes of JSON or text, bytes of
// binary.
const previewRunes = 48

// previewPayload keeps the start of b.
func previewPayload(b []byte) preview {
	p := preview{Bytes: len(b), Kind: classify(b)}
	var s string
	switch p.Kind {
	case kindJSON:
		var c bytes.Buffer
		_ = json.Compact(&c, b)
		s = c.String()
	case kindBSON:
		s = string(bsonFields(b))
	case kindText:
		s = string(b)
	case kindBinary:
		n := min(len(b), previewRunes)
		p.Preview = base64.StdEncoding.EncodeToString(b[:n])
		p.Truncated = n < len(b)
		return p
	}
	if utf8.RuneCountInString(s) > previewRunes {
		s = string([]rune(s)[:previewRunes])
		p.Truncated = true
	}
	p.Preview = s
	return p
}

// text writes the preview on one line.
func (p preview) text() string {
	more := ""
	if p.Truncated {
		more = "…"
	}
	size := plural(p.Bytes, "byte", "bytes")
	switch p.Kind {
	case kindEmpty:
		return "0 bytes"
	case kindJSON:
		return fmt.Sprintf("%s, JSON: %s%s", size, p.Preview, more)
	case kindBSON:
		return fmt.Sprintf("%s, BSON: %s%s", size, p.Preview, more)
	case kindText:
		return fmt.Sprintf("%s, text: %s%s", size, strconv.Quote(p.Preview), more)
	}
	return fmt.Sprintf("%s, binary, base64: %s%s", size, p.Preview, more)
}

// classify tells what kind of payload b is.
func classify(b []byte) string {
	switch {
	case len(b) == 0:
		return kindEmpty
	case json.Valid(b):
		return kindJSON
	case isBSONDocument(b):
		return kindBSON
	case utf8.Valid(b) && printableText(b):
		return kindText
	}
	return kindBinary
}

// isBSONDocument reports whether b is one whole, valid BSON document.
func isBSONDocument(b []byte) bool {
	if len(b) < 5 || int(binary.LittleEndian.Uint32(b)) != len(b) {
		return false
	}
	return bson.Raw(b).Validate() == nil
}

// printableText reports whether valid UTF-8 b holds only printable runes and whitespace.
func printableText(b []byte) bool {
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// bsonFields renders encoded BSON (a trace step, a spawn context: maps the stores keep as
// BSON) as JSON with sorted keys; values JSON cannot hold are written as extended JSON.
func bsonFields(b []byte) json.RawMessage {
	if m, err := contract.DecodeMap(b); err == nil {
		if out, err := json.Marshal(m); err == nil {
			return out
		}
	}
	if out, err := bson.MarshalExtJSON(bson.Raw(b), false, false); err == nil {
		return out
	}
	s, _ := json.Marshal(fmt.Sprintf("(%d bytes of unreadable BSON)", len(b)))
	return s
}

// relativeTo says how far the time at is from now, both as formatTime writes them; "-" when
// at is empty.
func relativeTo(at, now string) string {
	if at == "" {
		return "-"
	}
	t, err1 := time.Parse(time.RFC3339Nano, at)
	n, err2 := time.Parse(time.RFC3339Nano, now)
	if err1 != nil || err2 != nil {
		return "-"
	}
	return relative(t, n)
}
