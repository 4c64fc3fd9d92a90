package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/deadaction"
	"github.com/execstore/execstore/internal/inspect"
)

// deadFlags are the filters of dead items `dead`, `revive` and `discard` share.
type deadFlags struct {
	kinds, execution, definition, errorText *string
	olderThan                               *time.Duration
}

// registerDeadFlags declares the filters on fs.
func registerDeadFlags(fs *flag.FlagSet) deadFlags {
	return deadFlags{
		kinds:      fs.String("kind", "", "only these `kinds`, comma-separated: outbox, spawn, timer"),
		execution:  fs.String("execution", "", "only the dead items of execution `ID`"),
		definition: fs.String("definition", "", "only the dead items of executions of definition `D`"),
		errorText:  fs.String("error", "", "only the items whose last error contains `TEXT` (ignoring case)"),
		olderThan:  fs.Duration("older-than", 0, "only the items dead for at least `D` (by the local clock)"),
	}
}

// filter is the DeadFilter the flags give, at now, with limit.
func (d deadFlags) filter(now time.Time, limit int) (inspect.DeadFilter, error) {
	if *d.olderThan < 0 {
		return inspect.DeadFilter{}, usagef("-older-than must not be negative, got %v", *d.olderThan)
	}
	f := inspect.DeadFilter{Kinds: inspect.ParseKinds(*d.kinds), ExecutionID: *d.execution, Definition: *d.definition,
		ErrorContains: *d.errorText, Limit: limit}
	if *d.olderThan > 0 {
		f.DeadBefore = now.Add(-*d.olderThan)
	}
	if err := inspect.ValidateDeadFilter(&f); err != nil {
		return f, usagef("%v", err)
	}
	return f, nil
}

// deadOptions select the dead items `dead` prints.
type deadOptions struct {
	output
	Collection string
	Filter     inspect.DeadFilter
}

// listDead prints the newest dead items the filter selects, grouped by their last error:
// one find of the executions that hold dead items.
func listDead(ctx context.Context, db *mongo.Database, w io.Writer, o deadOptions) error {
	r, err := inspect.SelectDead(ctx, db.Collection(o.Collection), o.Filter)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeDeadSelection)
}

// writeDeadSelection writes a selection of dead items for people, by last error.
func writeDeadSelection(w io.Writer, r *inspect.DeadSelection) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintln(w, "dead: none")
		return err
	}
	of := ""
	if r.Matched > len(r.Items) {
		of = fmt.Sprintf(", the newest of %d", r.Matched)
	}
	fmt.Fprintf(w, "dead: %s%s, newest first, by last error\n", plural(len(r.Items), "item", "items"), of)
	for _, g := range r.Groups {
		fmt.Fprintf(w, "  %q: %s, the newest dead at %s\n", g.Error, plural(g.Count, "item", "items"), g.Newest)
		for _, i := range g.Items {
			d := r.Items[i]
			var what []string
			if d.Definition != "" {
				what = append(what, "definition "+plain(d.Definition))
			}
			switch execstore.ItemKind(d.Kind) {
			case execstore.OutboxItem:
				event := d.EventStart
				if d.EventType != "" {
					event = "of type " + plain(d.EventType)
				}
				what = append(what, fmt.Sprintf("to %s, event %s", plain(d.Target), event))
			case execstore.SpawnItem:
				what = append(what, "child "+plain(d.ChildID))
			}
			what = append(what, plural(d.Attempts, "attempt", "attempts"), "dead at "+d.DeadAt)
			fmt.Fprintf(w, "    %s: %s\n", d.Ref, strings.Join(what, ", "))
		}
	}
	if r.Truncated {
		fmt.Fprintf(w, "truncated: only the first %d executions holding dead items were read; narrow the filter\n", inspect.MaxDeadDocuments)
	}
	return nil
}

// writeDead writes an execution's dead items for people (show's), in the listing's order.
func writeDead(w io.Writer, items []inspect.DeadItem) error {
	fmt.Fprintf(w, "dead: %s\n", plural(len(items), "item", "items"))
	for _, d := range items {
		var what string
		switch execstore.ItemKind(d.Kind) {
		case execstore.OutboxItem:
			what = fmt.Sprintf("outbox %s/%d to %q (%d bytes)", d.Execution, d.Seq, d.Target, d.EventSize)
		case execstore.SpawnItem:
			what = fmt.Sprintf("spawn %s/%d of child %q", d.Execution, d.Seq, d.ChildID)
		default:
			what = fmt.Sprintf("timer %s %q at %s", d.Execution, d.Path, d.FireAt)
		}
		fmt.Fprintf(w, "  %s: %s, dead at %s: %s\n", what, plural(d.Attempts, "attempt", "attempts"), d.DeadAt, oneLine(d.LastError))
	}
	return nil
}

// oneLine is s with its line breaks as spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// itemList is -item, repeated: items named as the CLI writes them.
type itemList []execstore.ItemRef

func (l *itemList) String() string { return fmt.Sprint(len(*l)) }

func (l *itemList) Set(s string) error {
	ref, err := deadaction.ParseRef(s)
	if err != nil {
		return err
	}
	*l = append(*l, ref)
	return nil
}

// actOptions are what `revive` or `discard` does.
type actOptions struct {
	output
	Collection string
	Action     deadaction.Action
	Items      []execstore.ItemRef // named items; else the filter's
	Filter     inspect.DeadFilter
	Yes        bool // write; without it, print what would be done
}

// bindAct checks the flags of `revive` or `discard`: items named, or a filter, or -all.
func bindAct(action deadaction.Action, d deadFlags, items itemList, all, yes bool, out output, coll string) (runner, error) {
	f, err := d.filter(out.Now, inspect.MaxDeadSelected)
	if err != nil {
		return nil, err
	}
	switch {
	case len(items) > 0 && (!f.Empty() || all):
		return nil, usagef("-item names the items: it takes no filter and no -all")
	case len(items) == 0 && f.Empty() && !all:
		return nil, usagef("name the items to %s: -item, a filter (-kind, -execution, -definition, -error, -older-than), or -all for every dead item", action)
	case len(items) > inspect.MaxDeadSelected:
		return nil, usagef("at most %d -item at once, got %d", inspect.MaxDeadSelected, len(items))
	}
	o := actOptions{output: out, Collection: coll, Action: action, Items: items, Filter: f, Yes: yes}
	return func(ctx context.Context, db *mongo.Database, w io.Writer) error { return act(ctx, db, w, o) }, nil
}

// actReport is what `revive` and `discard` print with -json.
type actReport struct {
	Action deadaction.Action `json:"action"`
	DryRun bool              `json:"dry_run"`
	// Matched is how many items the filter selected (named items: how many were named).
	Matched int `json:"matched"`
	// Items are the items acted on (dry run: that would be), each with its outcome.
	Items  []deadaction.ItemResult `json:"items"`
	Counts map[string]int          `json:"counts,omitempty"`
}

// act revives or discards the items o names or selects, or with no -yes prints them.
func act(ctx context.Context, db *mongo.Database, w io.Writer, o actOptions) error {
	coll := db.Collection(o.Collection)
	refs, matched := o.Items, len(o.Items)
	if len(refs) == 0 {
		sel, err := inspect.SelectDead(ctx, coll, o.Filter)
		if err != nil {
			return err
		}
		for _, d := range sel.Items {
			refs = append(refs, d.ItemRef())
		}
		matched = sel.Matched
	}
	rep := actReport{Action: o.Action, DryRun: !o.Yes, Matched: matched, Items: []deadaction.ItemResult{}}
	if !o.Yes {
		for _, ref := range refs {
			rep.Items = append(rep.Items, deadaction.ItemResult{Ref: ref.String()})
		}
		return emit(w, o.output, &rep, writeAct)
	}
	who := deadaction.Requester{User: localUser()}
	r := deadaction.Apply(ctx, coll, o.Action, refs, who, slog.New(slog.NewTextHandler(o.stderr, nil)))
	rep.Items, rep.Counts = r.Items, r.Counts
	if err := emit(w, o.output, &rep, writeAct); err != nil {
		return err
	}
	if n := r.Counts[string(deadaction.Failed)] + r.Counts[string(deadaction.Unknown)] + r.Counts[string(deadaction.NotTried)]; n > 0 {
		return errors.New(plural(n, "item was", "items were") + " not settled: run the command again")
	}
	return nil
}

// writeAct writes what `revive` or `discard` did, or would do, for people.
func writeAct(w io.Writer, r *actReport) error {
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %s would be %s; run again with -yes to do it\n", plural(len(r.Items), "item", "items"), past(r.Action))
	} else {
		var parts []string
		for _, o := range []deadaction.Outcome{deadaction.Done, deadaction.NotDead, deadaction.Conflict, deadaction.Unknown, deadaction.Failed, deadaction.NotTried} {
			if n := r.Counts[string(o)]; n > 0 {
				label := string(o)
				if o == deadaction.Done {
					label = past(r.Action)
				}
				parts = append(parts, fmt.Sprintf("%d %s", n, label))
			}
		}
		if len(parts) == 0 {
			parts = []string{"nothing to do"}
		}
		fmt.Fprintf(w, "%s: %s\n", r.Action, strings.Join(parts, ", "))
	}
	for _, it := range r.Items {
		switch {
		case r.DryRun:
			fmt.Fprintf(w, "  %s\n", it.Ref)
		case it.Error != "":
			fmt.Fprintf(w, "  %s: %s: %s\n", it.Ref, it.Outcome, oneLine(it.Error))
		default:
			fmt.Fprintf(w, "  %s: %s\n", it.Ref, it.Outcome)
		}
	}
	if r.Matched > len(r.Items) {
		fmt.Fprintf(w, "more: the filter selected %d items; this run took the newest %d\n", r.Matched, len(r.Items))
	}
	return nil
}

// past is the action's past participle.
func past(a deadaction.Action) string {
	if a == deadaction.Revive {
		return "revived"
	}
	return "discarded"
}

// localUser names who runs the command, for the log: the user and the host.
func localUser() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}
