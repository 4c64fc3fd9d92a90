package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/deadaction"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// command is one subcommand: its name, what it reads, and its flags.
type command struct {
	name       string // "show", "idem get"
	args       string // its argument, for the usage: "ID"; "" for none
	summary    string // one line, for the list of commands
	detail     string // what it prints and what it costs, for its own usage
	collection string // the default of -collection; "" when it reads no collection
	payloads   bool   // it prints opaque payloads: its usage says what they look like
	serves     bool   // it runs until interrupted (ui): -timeout bounds connecting and each request
	// setup declares the command's own flags on fs and returns bind, which checks them and
	// the command's arguments (a *usageError when they are wrong) and returns the command
	// ready to run.
	setup func(fs *flag.FlagSet) (bind func(args []string, out output, collection string) (runner, error))
}

// runner runs a command whose flags and arguments are bound.
type runner func(ctx context.Context, db *mongo.Database, w io.Writer) error

// commands are the subcommands, in the order the usage lists them.
var commands = []command{
	{
		name: "show", args: "ID", collection: ops.ExecutionsCollection, payloads: true,
		summary: "one execution: snapshot, outbox, timers, spawns, trace, dedupe set",
		detail: `Prints the execution's id, definition, status, parent, version and snapshot (as JSON when
it is JSON or a BSON document, as text when it is text, else base64 up to 1 KiB, else its
size); its pending outbox entries (seq, version, target, the event's size and start; the
whole event with -json), its timers (path, fire time in RFC 3339, how far from now), its
pending spawn intents, the last trace steps, and the size of its dedupe set. One find by
_id.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			trace := fs.Int("trace", 10, "print the last `N` trace steps")
			dedupe := fs.Bool("dedupe", false, "list the dedupe set's event ids, not only their number")
			return func(args []string, out output, coll string) (runner, error) {
				if *trace < 0 {
					return nil, usagef("-trace must not be negative, got %d", *trace)
				}
				o := showOptions{output: out, Collection: coll, ID: args[0], Trace: *trace, Dedupe: *dedupe}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return showExecution(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "list", collection: ops.ExecutionsCollection,
		summary: "executions, filtered, one page at a time (by id, created or updated)",
		detail: `Prints one page of executions: id, definition, status, parent, version, when it was
created and last updated (its last commit; "-" for a document written before the store
recorded it); then the cursor of the next page. Filters AND together. One find: in id order
on the indexes the stores create; in created or updated order the server sorts what the
filters select.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			var statuses statusList
			fs.Var(&statuses, "status", "only executions with status `S`: repeat the flag or give a comma list")
			definition := fs.String("definition", "", "only executions of definition `D`")
			roots := fs.Bool("roots", false, "only executions without a parent")
			limit := fs.Int("limit", contract.DefaultListLimit, "page size `N`, at most 10000")
			after := fs.String("after", "", "resume after `CURSOR`, the next page's cursor as printed; in id order a value that is no cursor is taken as an execution id to resume after")
			sortBy := fs.String("sort", "id", "order by `FIELD`: id, created or updated (then id)")
			desc := fs.Bool("desc", false, "descending order")
			return func(_ []string, out output, coll string) (runner, error) {
				if err := checkLimit(*limit, contract.MaxListLimit); err != nil {
					return nil, err
				}
				order, err := inspect.ParseListSort(*sortBy)
				if err != nil {
					return nil, usagef("-sort: %v", err)
				}
				o := listOptions{output: out, Collection: coll, Statuses: statuses, Definition: *definition,
					Roots: *roots, Limit: *limit, After: *after, Sort: order, Desc: *desc}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listExecutions(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "outbox", collection: ops.ExecutionsCollection, payloads: true,
		summary: "the oldest pending outbox entries across executions",
		detail: `Prints the pending outbox entries (not acked yet: not delivered, in a handler, or
delivered with the ack on the way), oldest seq first: seq, source execution, version,
target, when its commit was made (by the committer's clock; "-" for entries written
before commits recorded it), the event's size and start. The seq orders entries across
executions, the version within one. Reads every execution with pending entries (one
find).`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			limit := fs.Int("limit", 100, "print at most `N` entries, the oldest")
			return func(_ []string, out output, coll string) (runner, error) {
				if err := checkLimit(*limit, maxRows); err != nil {
					return nil, err
				}
				o := outboxOptions{output: out, Collection: coll, Limit: *limit}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listOutbox(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "dead", collection: ops.ExecutionsCollection,
		summary: "the dead items: outbox entries, spawn intents and timers whose deliveries failed",
		detail: `Prints the items relays moved to dead, the newest first, grouped by their last error:
each named as revive -item takes it, with its execution's definition, an outbox event's
"type" field (or its first bytes), its failed deliveries and when it died. Filters AND
together. One find of the executions holding dead items (of -execution or -definition
when given), at most 20000 of them.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			limit := fs.Int("limit", 100, "print at most `N` items, the newest")
			filters := registerDeadFlags(fs)
			return func(_ []string, out output, coll string) (runner, error) {
				if err := checkLimit(*limit, inspect.MaxDeadSelected); err != nil {
					return nil, err
				}
				f, err := filters.filter(out.Now, *limit)
				if err != nil {
					return nil, err
				}
				o := deadOptions{output: out, Collection: coll, Filter: f}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listDead(ctx, db, w, o)
				}, nil
			}
		},
	},
	actCommand(deadaction.Revive, "put dead items back to pending, to be delivered again",
		`Puts dead items back to pending, each in one guarded write of its execution's document
that also moves the execution's version on (an engine holding the old version reloads);
the relays deliver them at their next scan. An item no longer dead is left alone.`),
	actCommand(deadaction.Discard, "drop dead items for good",
		`Drops dead items for good, each in one guarded write of its execution's document; they
are delivered no more. An item no longer dead is left alone.`),
	{
		name: "timers", collection: ops.ExecutionsCollection,
		summary: "the earliest timers across executions: the due ones, then the next",
		detail: `Prints the earliest timers across executions by fire time (RFC 3339, UTC, to the
nanosecond the stores read back): the due ones (fire time at or before now, by the
local clock) and then the next ones, with how far from now each is. One find in the order of the executions' timer hints; it stops once no later
execution can hold an earlier timer.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			limit := fs.Int("limit", 100, "print at most `N` timers, the earliest")
			return func(_ []string, out output, coll string) (runner, error) {
				if err := checkLimit(*limit, maxRows); err != nil {
					return nil, err
				}
				o := timersOptions{output: out, Collection: coll, Limit: *limit}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listTimers(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "backlog", collection: ops.ExecutionsCollection,
		summary: "the work waiting per partition, and what retention deleted",
		detail: `Prints, for each partition with work waiting, the pending outbox entries and spawn
intents, how long the oldest has waited (from its commit time, by its committer's clock),
the due timers (by the local clock) and how late the most overdue is, and the dead items;
then the totals, and the executions retention deleted by status, and when it last did.
Entries written by earlier versions record no commit time and count without an age. The
aggregation execstore.Store.Backlog sends (one find instead on a server without its
operators), then one find of the retention's counters.`,
		setup: func(*flag.FlagSet) func([]string, output, string) (runner, error) {
			return func(_ []string, out output, coll string) (runner, error) {
				o := backlogOptions{output: out, Collection: coll}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return showBacklog(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "idem get", args: "KEY", collection: "idempotency",
		summary: "one idempotency record",
		detail: `Prints the record of KEY: state, fingerprint, claim and completion times, the end of its
lease or retention and whether it has lapsed (by the server's clock), and for a
completed record the response's status, header names and body size. Header values and
the claim token are never printed; the body only with -body. A hello, then one find.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			body := fs.Bool("body", false, "print the stored response's body")
			return func(args []string, out output, coll string) (runner, error) {
				o := idemOptions{output: out, Collection: coll, Key: args[0], Body: *body}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return getIdem(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "idem list", args: "PREFIX", collection: "idempotency",
		summary: "the idempotency records under a key prefix, one page at a time (by key)",
		detail: `Prints one page of the records whose key starts with PREFIX, in key order, one row each:
key, state, fingerprint and its version, claim time, the end of its lease or retention,
how far that is from now and whether it has lapsed (by the server's clock), and for a
completed record the response's status, number of headers and body size. Completed
records past their retention are shown too, as lapsed. The claim token, header values
and bodies are never printed; -json gives each record as "idem get -json" does, without
a body. Then the cursor of the next page. The server's clock, then one find on the _id
index.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			limit := fs.Int("limit", defaultIdemListLimit, "page size `N`, at most 10000")
			after := fs.String("after", "", "resume after `CURSOR`, the next page's cursor as printed; a value that is no cursor is taken as a key to resume after")
			return func(args []string, out output, coll string) (runner, error) {
				if err := checkLimit(*limit, contract.MaxListLimit); err != nil {
					return nil, err
				}
				o := idemListOptions{output: out, Collection: coll, Prefix: args[0], Limit: *limit, After: *after}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listIdem(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "rates", collection: ops.ExecutionsCollection,
		summary: "what the relays and sweepers did, minute by minute",
		detail: `Prints, for each of the last minutes, what the relays and sweepers recorded
(relay.Options.RatesInterval) in the rate samples of the executions collection (its name
with "_rates" appended), summed over them: handler calls that returned nil (delivered
entries and spawns; fired timers), that failed, items moved to dead, and the oldest wait
a scan found. A minute none recorded is a row of zeros. One find on the _id index.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			minutes := fs.Int("minutes", 15, "the last `N` minutes, at most 1440")
			return func(_ []string, out output, coll string) (runner, error) {
				if err := checkLimit(*minutes, 1440); err != nil {
					return nil, err
				}
				o := ratesOptions{output: out, Collection: coll, Minutes: *minutes}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listRates(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name:    "relays",
		summary: "the relays sharing the partitions: members, and each partition's lease",
		detail: `Prints the relays registered under a lease key in their lease store (an idem store) and
the lease of each partition: whether a relay holds it, when the lease was claimed and
ends by the server's clock, how long it has left, and whether its claim took over a
lapsed lease. Each member shows how many partitions it holds. A lease names its holder,
the member whose claim took it; its claim token is never printed. A partition the
members divide the store into and nobody holds shows as nobody's. Sweepers register
under "` + sweeperLeaseKey + `": without -lease-key, their leases follow the relays' when
there are any (text only; -json prints the relays'). The lease store is -collection in -db when given;
else the first that holds a record under the lease key of "idempotency" in -db, then
"idempotency" and "executions" (aio's Store.LeaseStore) in -db with "_leases" appended.
It prints where it read them. Each is the server's clock, then one find on the _id
index.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			leaseKey := fs.String("lease-key", relayLeaseKey, "the relays' Options.LeaseKey `KEY`")
			return func(_ []string, out output, coll string) (runner, error) {
				if *leaseKey == "" {
					return nil, usagef("-lease-key must not be empty")
				}
				o := relaysOptions{output: out, Collection: coll, LeaseKey: *leaseKey, Sweepers: !flagSet(fs, "lease-key")}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listRelays(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "journal show", args: "ID", collection: "journal",
		summary: "one journal invocation's metadata, never its sealed payloads",
		detail: `Prints the invocation's identity, owner, revision, checkpoint (id, phase), prepared
operation (the checkpoint it continues from), attempts, latest state, no-replay flag
and receipts (attempt, outcome). Checkpoints, operations and receipts' evidence are
sealed: they are never opened, and show only as their size and the id of the key that
sealed them. One find.`,
		setup: func(*flag.FlagSet) func([]string, output, string) (runner, error) {
			return func(args []string, out output, coll string) (runner, error) {
				o := journalOptions{output: out, Collection: coll, ID: args[0]}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return showJournal(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "journal list", collection: "journal",
		summary: "journal invocations by latest attempt state and owner, never their sealed payloads",
		detail: `Prints a page of journal invocations in id order: owner, revision, last checkpoint's
phase, attempts, latest attempt state and no-replay flag, and when the latest receipt
was recorded (the only time the journal keeps). -state pending finds the attempts handed
out with no receipt yet (a worker that died, or one still running); -state unknown the
ones that need the outside system's receipt before anything else (Reconcile). One find
sorted by _id; the state and owner are read from the documents, not an index.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			state := fs.String("state", "", "only invocations whose latest attempt is `STATE`: none, pending, succeeded, failed or unknown")
			owner := fs.String("owner", "", "only invocations of `OWNER`")
			limit := fs.Int("limit", contract.DefaultListLimit, "page size `N`, at most 10000")
			after := fs.String("after", "", "resume after `CURSOR` (a page's next cursor, or an invocation id)")
			return func(_ []string, out output, coll string) (runner, error) {
				if !inspect.ValidInvocationState(*state) {
					return nil, usagef("-state %q: want none, pending, succeeded, failed or unknown", *state)
				}
				if err := checkLimit(*limit, contract.MaxListLimit); err != nil {
					return nil, err
				}
				o := journalListOptions{output: out, Collection: coll,
					Query: inspect.InvocationQuery{State: *state, Owner: *owner, Limit: *limit, After: *after}}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return listJournal(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "journal retention", collection: "journal",
		summary: "the finished invocations the journal's retention deleted",
		detail: `Prints how many finished invocations the journal's retention (journal.Options.Retention,
or DeleteExpired) deleted from the collection since its data was created, and when it
last did, by the deleting process's clock. One find by _id in the database's counters.`,
		setup: func(*flag.FlagSet) func([]string, output, string) (runner, error) {
			return func(_ []string, out output, coll string) (runner, error) {
				o := journalRetentionOptions{output: out, Collection: coll}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return showJournalRetention(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name: "ui", collection: ops.ExecutionsCollection, serves: true,
		summary: "a web UI of the same, read-only unless -actions, until interrupted",
		detail: `Serves a read-only web UI (package ui) on -listen until interrupted: an overview, the
executions, one execution, the outbox, the timers, the dead items, the backlog, the
relays, idempotency records and journal invocations, each page also as ?format=json in
the shapes -json prints. It answers GET and HEAD only and sends the server only reads.
Basic authentication is on when EXECSTORE_UI_USER is set (with EXECSTORE_UI_PASSWORD).
-actions turns on the dead items' revive and discard (it needs basic authentication):
POSTs with a CSRF token, each shown for confirmation, then logged on standard error with
the user.
-timeout bounds connecting and each request's reads. -collection names the executions
collection; the idempotency records are read from "idempotency", the journal from
"journal", and the relays' leases where relays keep them, as relays looks for them.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			listen := fs.String("listen", "127.0.0.1:8080", "listen on `ADDRESS`; only this machine can reach the default")
			leaseKey := fs.String("lease-key", relayLeaseKey, "the relays' Options.LeaseKey `KEY`")
			refresh := fs.Duration("refresh", 10*time.Second, "refresh the open pages every `D`; 0 turns it off")
			actions := fs.Bool("actions", false, "turn on revive and discard of dead items (writes; needs basic authentication)")
			return func(_ []string, out output, coll string) (runner, error) {
				if *listen == "" {
					return nil, usagef("-listen must not be empty")
				}
				if err := checkUIAuth(out.getenv, *actions); err != nil {
					return nil, err
				}
				o := uiOptions{output: out, Collection: coll, Listen: *listen, LeaseKey: *leaseKey, Refresh: *refresh, Actions: *actions}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return serveUI(ctx, db, w, o)
				}, nil
			}
		},
	},
	{
		name:       "server",
		collection: ops.ExecutionsCollection,
		summary:    "what the server is, as the stores identify it",
		detail: `Prints the server's family, version and wire version (hello and buildInfo), and the
profile aio picks for it by the probe it opens with (a find that matches no document).`,
		setup: func(*flag.FlagSet) func([]string, output, string) (runner, error) {
			return func(_ []string, out output, coll string) (runner, error) {
				o := serverOptions{output: out}
				return func(ctx context.Context, db *mongo.Database, w io.Writer) error {
					return identifyServer(ctx, db, coll, w, o)
				}, nil
			}
		},
	},
}

// actCommand is `revive` or `discard`: the only commands that write, and only with -yes.
func actCommand(action deadaction.Action, summary, detail string) command {
	return command{
		name: string(action), collection: ops.ExecutionsCollection,
		summary: summary + " (writes, with -yes)",
		detail: detail + `
Name the items with -item (repeat it; as dead prints them), or select them with the
filters dead takes (the newest 10000 of them), or -all. Without -yes it only prints the
items it would act on. With -yes it acts, up to 4 writes at once, prints each item's
outcome (done, not dead, conflict, unknown, failed) and logs each with the local user
and host on standard error; it exits 1 when an item's outcome is unknown or failed, or it
was not tried: run it again, as acting twice is harmless. -timeout bounds the whole run
(each item is a read and a write): raise it for thousands of items.`,
		setup: func(fs *flag.FlagSet) func([]string, output, string) (runner, error) {
			filters := registerDeadFlags(fs)
			var items itemList
			fs.Var(&items, "item", "the dead item `REF`, as dead prints it: \"outbox ID/SEQ\", \"spawn ID/SEQ\" or 'timer ID \"PATH\" at TIME'")
			all := fs.Bool("all", false, "every dead item (the newest 10000), when no filter is given")
			yes := fs.Bool("yes", false, "write: without it, print what would be done")
			return func(_ []string, out output, coll string) (runner, error) {
				return bindAct(action, filters, items, *all, *yes, out, coll)
			}
		},
	}
}

// maxRows bounds the -limit of outbox and timers.
const maxRows = 100_000

// lookupCommand finds the command args start with, and returns the arguments after its name.
func lookupCommand(args []string) (*command, []string, bool) {
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == commands[i].name {
			return &commands[i], args[len(words):], true
		}
	}
	return nil, nil, false
}

// groupCommands returns the commands of the group named word: those whose name is word
// followed by more words ("idem get"), in the order the usage lists them. It returns none
// when word names no group.
func groupCommands(word string) []*command {
	var group []*command
	for i := range commands {
		if first, _, more := strings.Cut(commands[i].name, " "); more && first == word {
			group = append(group, &commands[i])
		}
	}
	return group
}

// nargs is how many arguments the command takes.
func (c *command) nargs() int {
	if c.args == "" {
		return 0
	}
	return 1
}
