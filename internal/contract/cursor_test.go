package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, id := range []string{"a", "exe-1", "ünï.$", "x y"} {
		got, err := DecodeCursor(EncodeCursor(id))
		require.NoError(t, err)
		assert.Equal(t, id, got)
	}
	got, err := DecodeCursor("")
	require.NoError(t, err)
	assert.Equal(t, "", got)
}

func TestCursorGarbage(t *testing.T) {
	for _, c := range []string{"garbage!", "AQ", "Ag", "AgFi", "%%", "AQD_", "////", EncodeCursor("")} {
		_, err := DecodeCursor(c)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%q", c)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add(EncodeCursor("exe-1"))
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, c string) {
		id, err := DecodeCursor(c)
		if err != nil {
			return
		}
		if c != "" && EncodeCursor(id) != c {
			t.Fatalf("cursor %q decodes to %q which encodes differently", c, id)
		}
	})
}
