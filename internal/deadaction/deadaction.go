// Package deadaction revives and discards dead items for an operator: the writes behind the
// command execstore's revive and discard and the web UI's actions (package ui).
//
// What always holds:
//   - Each item is one write of its execution's document, the stores' own
//     (execstore.DeadLetters' Revive and Discard, through package opsrun): guarded by the item
//     being dead as named, so an item another process revived, discarded or moved since is
//     left alone and reported NotDead. Applying an action twice is harmless.
//   - A revive moves the execution's version on, as DeadLetters.Revive documents: an engine
//     process holding the execution at the old version gets a conflict and reloads.
//   - A write whose answer was lost is reported Unknown, never done nor failed: applying the
//     action again settles it.
//   - Every outcome is logged with who asked, the action and the item, as the execstore
//     CLI names it (execstore.ItemRef's String).
package deadaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

// Action is what is done to dead items.
type Action string

// The actions.
const (
	Revive  Action = "revive"  // back to pending, delivered again (execstore.DeadLetters.Revive)
	Discard Action = "discard" // dropped for good (execstore.DeadLetters.Discard)
)

// ParseAction reads an action's name.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case Revive, Discard:
		return a, nil
	}
	return "", contract.Invalid("action", "is %q, not %q or %q", s, Revive, Discard)
}

// Outcome is what became of one item.
type Outcome string

// The outcomes.
const (
	Done     Outcome = "done"     // revived or discarded by this call
	NotDead  Outcome = "not dead" // not dead when written: revived, discarded or never dead
	Conflict Outcome = "conflict" // a dead timer whose path holds another timer: it stays dead
	Unknown  Outcome = "unknown"  // the write's answer was lost: it may or may not have applied
	Failed   Outcome = "failed"   // an error: nothing written
	NotTried Outcome = "not tried"
)

// ItemResult is one item's outcome.
type ItemResult struct {
	Ref     string  `json:"ref"` // as execstore.ItemRef's String
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

// Result is what one action did.
type Result struct {
	Action Action         `json:"action"`
	Items  []ItemResult   `json:"items"`
	Counts map[string]int `json:"counts"` // items by Outcome
}

// Requester is who asked for an action, for the log: a user name and where from.
type Requester struct {
	User string
	From string // a remote address or host; "" when local
}

// parallel bounds the writes one action has in flight.
const parallel = 4

// Apply does action to each of refs, up to 4 writes at once, on the executions collection
// coll, logging each outcome with who to log (nil: slog.Default). A context that ends stops it: the items not
// written yet are NotTried.
func Apply(ctx context.Context, coll *mongo.Collection, action Action, refs []execstore.ItemRef, who Requester, log *slog.Logger) Result {
	if log == nil {
		log = slog.Default()
	}
	env := opsrun.Env{Executions: coll, Primary: opsrun.PrimaryReads(coll)}
	out := make([]ItemResult, len(refs))
	p := pool.New().WithMaxGoroutines(parallel)
	for i, ref := range refs {
		p.Go(func() { out[i] = apply(ctx, env, action, ref) })
	}
	p.Wait()
	r := Result{Action: action, Items: out, Counts: map[string]int{}}
	for i, it := range out {
		r.Counts[string(it.Outcome)]++
		attrs := []any{"user", who.User, "action", string(action), "item", refs[i], "outcome", string(it.Outcome)}
		if who.From != "" {
			attrs = append(attrs, "from", who.From)
		}
		if it.Error != "" {
			attrs = append(attrs, "error", it.Error)
		}
		level := slog.LevelInfo
		if it.Outcome == Failed || it.Outcome == Unknown {
			level = slog.LevelWarn
		}
		log.Log(context.WithoutCancel(ctx), level, "dead item "+string(action), attrs...)
	}
	return r
}

// apply does action to one item.
func apply(ctx context.Context, env opsrun.Env, action Action, ref execstore.ItemRef) ItemResult {
	r := ItemResult{Ref: ref.String()}
	if err := contract.ValidateItemRef(ref); err != nil {
		r.Outcome, r.Error = Failed, err.Error()
		return r
	}
	if ctx.Err() != nil {
		r.Outcome = NotTried
		return r
	}
	ref = contract.NormalRef(ref)
	var ok bool
	var err error
	if action == Revive {
		ok, err = opsrun.Revive(ctx, env, ref)
	} else {
		ok, err = opsrun.Discard(ctx, env, ref)
	}
	var unknown *execstore.OutcomeUnknownError
	switch {
	case errors.As(err, &unknown):
		r.Outcome, r.Error = Unknown, err.Error()
	case errors.Is(err, execstore.ErrConflict):
		r.Outcome, r.Error = Conflict, err.Error()
	case err != nil:
		r.Outcome, r.Error = Failed, err.Error()
	case ok:
		r.Outcome = Done
	default:
		r.Outcome = NotDead
	}
	return r
}

// ParseRef reads an item's name as execstore.ItemRef's String writes it: "outbox ID/SEQ",
// "spawn ID/SEQ", or `timer ID "PATH" at TIME` (RFC 3339).
func ParseRef(s string) (execstore.ItemRef, error) {
	bad := func(why string) (execstore.ItemRef, error) {
		return execstore.ItemRef{}, contract.Invalid("item", "%q %s: name it as `outbox ID/SEQ`, `spawn ID/SEQ` or `timer ID \"PATH\" at TIME`", s, why)
	}
	kind, rest, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return bad("has no execution")
	}
	var ref execstore.ItemRef
	switch execstore.ItemKind(kind) {
	case execstore.OutboxItem, execstore.SpawnItem:
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return bad("has no /SEQ")
		}
		seq, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if err != nil || seq < 0 {
			return bad("has no number after the last /")
		}
		ref = execstore.ItemRef{Kind: execstore.ItemKind(kind), ExecutionID: rest[:i], Seq: seq}
	case execstore.TimerItem:
		j := strings.LastIndex(rest, " at ")
		if j < 0 {
			return bad("has no fire time")
		}
		at, err := time.Parse(time.RFC3339Nano, rest[j+len(" at "):])
		if err != nil {
			return bad("has a fire time that is not RFC 3339")
		}
		head := rest[:j]
		found := false
		for i := strings.Index(head, ` "`); i >= 0; {
			if path, err := strconv.Unquote(head[i+1:]); err == nil {
				ref = execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: head[:i], Path: path, FireAt: at}
				found = true
				break
			}
			next := strings.Index(head[i+1:], ` "`)
			if next < 0 {
				break
			}
			i += 1 + next
		}
		if !found {
			return bad("has no quoted path")
		}
	default:
		return bad(fmt.Sprintf("is of no kind (%q)", kind))
	}
	if err := contract.ValidateItemRef(ref); err != nil {
		return execstore.ItemRef{}, err
	}
	return ref, nil
}
