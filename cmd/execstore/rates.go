package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// ratesOptions are what `rates` prints.
type ratesOptions struct {
	output
	Collection string // the executions collection
	Minutes    int
}

// listRates prints what the relays and sweepers recorded of the last minutes: one find on
// the _id index of the rate samples.
func listRates(ctx context.Context, db *mongo.Database, w io.Writer, o ratesOptions) error {
	r, err := inspect.ReadRates(ctx, db, o.Collection, o.Now, o.Minutes)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeRates)
}

// writeRates writes the rates for people, a row per minute, the latest last.
func writeRates(w io.Writer, r *inspect.Rates) error {
	fmt.Fprintf(w, "rates of the last %s in %s, recorded by %s\n", plural(len(r.Minutes), "minute", "minutes"), plain(r.Source),
		plural(r.Members, "relay or sweeper", "relays and sweepers"))
	rows := make([][]string, len(r.Minutes))
	for i, m := range r.Minutes {
		rows[i] = []string{m.Minute, strconv.FormatInt(m.Delivered, 10), strconv.FormatInt(m.Fired, 10),
			strconv.FormatInt(m.Failed, 10), strconv.FormatInt(m.Dead, 10), strconv.FormatFloat(m.AgeSeconds, 'f', 1, 64) + "s"}
	}
	return table(w, "  ", []string{"MINUTE", "DELIVERED", "FIRED", "FAILED", "DEAD", "OLDEST WAIT"}, rows)
}
