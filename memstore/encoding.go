package memstore

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Spawn contexts and trace steps are kept as encoded BSON, as the MongoDB store keeps them, so
// that they come back with the types a MongoDB read gives them and share nothing with the
// caller's maps. The decoding is the MongoDB store's (ops/encoding.go decodeMap).

// encodeMap encodes m as a BSON document; nil is kept as the empty document.
func encodeMap(m map[string]any) ([]byte, error) {
	if m == nil {
		m = map[string]any{}
	}
	return bson.Marshal(m)
}

// decodeMap decodes a document encodeMap made: nested documents as map[string]any, arrays as
// []any, every other value as BSON decodes it into an interface.
func decodeMap(b []byte) (map[string]any, error) {
	var m bson.M
	if err := bson.Unmarshal(b, &m); err != nil {
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
	}
	return v
}
