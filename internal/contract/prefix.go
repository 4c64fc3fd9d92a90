package contract

import "go.mongodb.org/mongo-driver/v2/bson"

// PrefixRange is the range of the keys that start with prefix: every such key sorts at or
// after prefix and before prefix followed by the greatest code point. Match a key field
// against it ({_id: PrefixRange(p)}): a server serves it from the field's index.
func PrefixRange(prefix string) bson.D {
	return bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: prefix + "\U0010FFFF"}}
}
