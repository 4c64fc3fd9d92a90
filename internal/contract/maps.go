package contract

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Spawn contexts and trace steps are caller maps that every store keeps as encoded BSON, so
// that any key round-trips (dots, dollars) and they come back with the types a MongoDB read
// gives them: nested documents as map[string]any, arrays as []any, numbers as BSON decodes
// them (an int as int32 or int64, …). A store shares nothing with the caller's maps.

// EncodeMap encodes m as a BSON document; nil is kept as the empty document.
func EncodeMap(m map[string]any) ([]byte, error) {
	if m == nil {
		m = map[string]any{}
	}
	return bson.Marshal(m)
}

// DecodeMap decodes a map EncodeMap made.
func DecodeMap(b []byte) (map[string]any, error) {
	m := map[string]any{}
	if len(b) == 0 {
		return m, nil
	}
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(b)))
	dec.DefaultDocumentM()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return plain(m).(map[string]any), nil
}

// plain turns the documents and arrays inside a decoded value into plain maps and slices.
func plain(v any) any {
	switch t := v.(type) {
	case bson.M:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = plain(x)
		}
		return m
	case map[string]any:
		for k, x := range t {
			t[k] = plain(x)
		}
		return t
	case bson.D:
		m := make(map[string]any, len(t))
		for _, e := range t {
			m[e.Key] = plain(e.Value)
		}
		return m
	case bson.A:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = plain(x)
		}
		return a
	case []any:
		for i, x := range t {
			t[i] = plain(x)
		}
		return t
	}
	return v
}

// DedupeGeneration says where the commit that creates version records its event id under a
// dedupe window (window > 0): in generation set gen (0 or 1), which it first empties when
// starts. The two sets take turns by generation of window versions, so together they hold the
// ids of at least the last window commits and of at most the last 2×window.
func DedupeGeneration(version int64, window int) (gen int, starts bool) {
	w := int64(window)
	return int((version / w) % 2), version%w == 0
}

// DedupeStillHeld reports whether, under a dedupe window (window > 0), the event id recorded
// by the commit that created version recorded is still in the dedupe set at version current
// (current >= recorded): the set holds the ids of the current generation and of the one
// before it, a generation being window versions.
func DedupeStillHeld(recorded, current int64, window int) bool {
	w := int64(window)
	return current/w-recorded/w <= 1
}
