package ops

import (
	"strings"
	"unicode/utf8"
)

// EncodeKey turns arbitrary text into a string that is safe as one MongoDB field name: no
// ".", no "$", no NUL, valid UTF-8. It escapes those bytes, "%" itself and every byte of an
// invalid UTF-8 sequence as "%XX", so DecodeKey(EncodeKey(s)) == s for every s and distinct
// inputs never share a key. A timer at path is stored under FieldTimers as EncodeKey(path).
func EncodeKey(s string) string {
	if !needsEscape(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '%' || c == '.' || c == '$' || c == 0 {
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.ContainsAny(s, "%.$\x00")
}

// DecodeKey reverses EncodeKey. It reports false for a string EncodeKey cannot produce.
func DecodeKey(k string) (string, bool) {
	if !strings.Contains(k, "%") {
		return k, !strings.ContainsAny(k, ".$\x00") && utf8.ValidString(k)
	}
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(k) {
			return "", false
		}
		hi, ok1 := unhex(k[i+1])
		lo, ok2 := unhex(k[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
