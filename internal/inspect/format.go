package inspect

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// FormatTime returns t as RFC 3339 in UTC, with three digits of milliseconds when it has
// any (times the server stamps), without when it has none (fire times in whole seconds).
func FormatTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/int(time.Millisecond) != 0 {
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Format(time.RFC3339)
}

// Relative says how far t is from now: "in 16m40s", "3d4h ago", "now".
func Relative(t, now time.Time) string { return FromNow(t.Sub(now)) }

// RelativeSeconds is Relative for a distance in seconds.
func RelativeSeconds(s float64) string { return FromNow(time.Duration(s * float64(time.Second))) }

// FromNow says how far from now a time d away is.
func FromNow(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + ShortDuration(d)
	default:
		return ShortDuration(-d) + " ago"
	}
}

// ShortDuration writes a duration of whole seconds in its largest unit and the next one,
// the rest dropped: "16m40s", "2h", "3d4h" (for 3d4h12m), "45s".
func ShortDuration(d time.Duration) string {
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

// plural returns "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// WriteJSON writes v as the reports' JSON: one indented document, without HTML escaping.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// seconds is a duration in seconds, for JSON.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// The kinds of payload a report tells apart.
const (
	kindEmpty  = "empty"
	kindJSON   = "json"
	kindBSON   = "bson"
	kindText   = "text"
	kindBinary = "binary"
)

// Payload is opaque bytes shown whole, in one shape wherever they are stored (a snapshot, an
// outbox event, a response body): JSON as its value and a BSON document as a JSON object
// (both under "json"), other UTF-8 text as a string ("text"), anything else as base64
// ("base64") up to maxBase64 bytes, past which only its size is shown. Fields a kind does not
// have are left out.
type Payload struct {
	Bytes  int             `json:"bytes"`
	Kind   string          `json:"kind"` // empty, json, bson, text or binary
	JSON   json.RawMessage `json:"json,omitempty"`
	Text   *string         `json:"text,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

// maxBase64 is the largest binary payload shown (as base64); larger ones show their size.
const maxBase64 = 1024

// describePayload classifies b and keeps what the report shows of it.
func describePayload(b []byte) Payload {
	p := Payload{Bytes: len(b), Kind: classify(b)}
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

// Line is the payload on one line, as text output shows it.
func (p Payload) Line() string {
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

// Preview is the start of opaque bytes, for a table row (an outbox event); the report's
// JSON shows the whole payload.
type Preview struct {
	Bytes     int
	Kind      string // a payload's kinds; binary is previewed as base64
	Preview   string
	Truncated bool
}

// previewRunes is how much of a payload a preview shows: runes of JSON or text, bytes of
// binary.
const previewRunes = 48

// previewPayload keeps the start of b.
func previewPayload(b []byte) Preview {
	p := Preview{Bytes: len(b), Kind: classify(b)}
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

// Line is the preview on one line.
func (p Preview) Line() string {
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

// RelativeTo says how far the time at is from now, both as FormatTime writes them; "-" when
// at is empty.
func RelativeTo(at, now string) string {
	if at == "" {
		return "-"
	}
	t, err1 := time.Parse(time.RFC3339Nano, at)
	n, err2 := time.Parse(time.RFC3339Nano, now)
	if err1 != nil || err2 != nil {
		return "-"
	}
	return Relative(t, n)
}
