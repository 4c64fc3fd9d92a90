package unique

import "go.mongodb.org/mongo-driver/v2/bson"

// IDOnlyUpserts returns the filters of the upserts in cmd, a command document as a command
// monitor sees it, whose filter is the _id alone: a findAndModify with upsert, an update's
// statements with upsert, or a client bulkWrite's update operations with upsert. Tests watch
// every command a path sends with it, so that such an upsert cannot come back unnoticed.
func IDOnlyUpserts(cmd bson.Raw) []bson.Raw {
	var out []bson.Raw
	check := func(filter bson.RawValue, upsert bson.RawValue) {
		if up, ok := upsert.BooleanOK(); !ok || !up {
			return
		}
		doc, ok := filter.DocumentOK()
		if !ok {
			return
		}
		if elems, err := doc.Elements(); err == nil && len(elems) == 1 && elems[0].Key() == "_id" {
			out = append(out, doc)
		}
	}
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return nil
	}
	switch elems[0].Key() {
	case "findAndModify", "findandmodify":
		check(cmd.Lookup("query"), cmd.Lookup("upsert"))
	case "update":
		eachDoc(cmd.Lookup("updates"), func(st bson.Raw) { check(st.Lookup("q"), st.Lookup("upsert")) })
	case "bulkWrite":
		eachDoc(cmd.Lookup("ops"), func(op bson.Raw) {
			if _, ok := op.Lookup("update").AsInt64OK(); ok {
				check(op.Lookup("filter"), op.Lookup("upsert"))
			}
		})
	}
	return out
}

// eachDoc calls f with each document of the array v (a command's statements).
func eachDoc(v bson.RawValue, f func(bson.Raw)) {
	arr, ok := v.ArrayOK()
	if !ok {
		return
	}
	vals, err := arr.Values()
	if err != nil {
		return
	}
	for _, e := range vals {
		if d, ok := e.DocumentOK(); ok {
			f(d)
		}
	}
}
