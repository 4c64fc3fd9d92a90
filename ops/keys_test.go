package ops

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestEncodeKeyRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", "Fork.A", "Fork．A", "$set", "a$b", "%", "%2E", "%%", "nul\x00",
		"bad\xff", "\xc3", "ünï.$%．", "..", "timers.x", "日本語", strings.Repeat(".", 50)} {
		k := EncodeKey(s)
		assert.False(t, strings.ContainsAny(k, ".$\x00"), "key %q of %q", k, s)
		assert.True(t, utf8.ValidString(k), "key %q of %q", k, s)
		back, ok := DecodeKey(k)
		assert.True(t, ok, "%q", s)
		assert.Equal(t, s, back)
	}
}

func TestEncodeKeyExact(t *testing.T) {
	assert.Equal(t, "Fork%2EA", EncodeKey("Fork.A"))
	assert.Equal(t, "Fork．A", EncodeKey("Fork．A")) // the seed's replacement character stays itself
	assert.Equal(t, "%24x%25", EncodeKey("$x%"))
	assert.Equal(t, "a%FFb", EncodeKey("a\xffb"))
}

func TestDecodeKeyRejectsForeignKeys(t *testing.T) {
	for _, k := range []string{"%", "%2", "%zz", "%2e", "a.b", "$x", "\xff"} {
		_, ok := DecodeKey(k)
		assert.False(t, ok, "%q", k)
	}
}

func FuzzEncodeKey(f *testing.F) {
	for _, s := range []string{"", "Fork.A", "Fork．A", "$", "%", "%2E", "\x00", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := EncodeKey(s)
		if strings.ContainsAny(k, ".$\x00") || !utf8.ValidString(k) {
			t.Fatalf("unsafe key %q for %q", k, s)
		}
		back, ok := DecodeKey(k)
		if !ok || back != s {
			t.Fatalf("round trip of %q gave %q (%v)", s, back, ok)
		}
	})
}
