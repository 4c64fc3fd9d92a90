package ops

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// decodeMap decodes a map stored as encoded BSON (spawn contexts, trace steps). Nested
// documents come back as map[string]any, arrays as []any.
func decodeMap(b []byte) (map[string]any, error) {
	m := map[string]any{}
	if len(b) == 0 {
		return m, nil
	}
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(b)))
	dec.DefaultDocumentM()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return normalize(m).(map[string]any), nil
}

// normalize turns bson.M and bson.A inside a decoded value into plain maps and slices.
func normalize(v any) any {
	switch t := v.(type) {
	case bson.M:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = normalize(x)
		}
		return m
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case bson.A:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = normalize(x)
		}
		return a
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	}
	return v
}
