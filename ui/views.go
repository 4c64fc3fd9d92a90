package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// view is one page: its route, its title and template, and how it reads its data.
type view struct {
	name    string // its template, and the navigation entry it lights
	title   string
	pattern string
	read    func(ctx context.Context, h *handler, q request) (any, error)
}

// views are the pages, in the navigation's order.
var views = []view{
	{name: "overview", title: "Overview", pattern: "/{$}", read: readOverview},
	{name: "executions", title: "Executions", pattern: "/executions", read: readExecutions},
	{name: "execution", title: "Execution", pattern: "/executions/{id}", read: readExecution},
	{name: "outbox", title: "Outbox", pattern: "/outbox", read: readOutbox},
	{name: "timers", title: "Timers", pattern: "/timers", read: readTimers},
	{name: "dead", title: "Dead items", pattern: "/dead", read: readDead},
	{name: "backlog", title: "Backlog", pattern: "/backlog", read: readBacklog},
	{name: "relays", title: "Relays", pattern: "/relays", read: readRelays},
	{name: "idem", title: "Idempotency", pattern: "/idem", read: readIdem},
	{name: "journal", title: "Journal", pattern: "/journal", read: readJournal},
}

// jsonReport is a page whose JSON is not the page itself but a report of package inspect.
type jsonReport interface{ report() any }

// jsonOf is what ?format=json writes of a view's data.
func jsonOf(data any) any {
	if r, ok := data.(jsonReport); ok {
		return r.report()
	}
	return data
}

// overviewPage is the overview: the executions by status, the backlog and the relays.
type overviewPage struct {
	Statuses *inspect.StatusCounts `json:"statuses"`
	Backlog  *inspect.Backlog      `json:"backlog"`
	Relays   *inspect.Relays       `json:"relays"`
	// Rates are the last hour's rate samples, per minute; Charts draw them.
	Rates  *inspect.Rates `json:"rates"`
	Charts []barChart     `json:"-"`
}

// readOverview sends the overview's four reads at once: they are independent, and the
// page takes as long as the slowest.
func readOverview(ctx context.Context, h *handler, q request) (any, error) {
	p := &overviewPage{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		p.Statuses, err = inspect.CountStatuses(gctx, h.executions())
		return err
	})
	g.Go(func() (err error) {
		p.Backlog, err = h.backlog(gctx, q)
		return err
	})
	g.Go(func() (err error) {
		p.Relays, err = inspect.ReadRelaysIn(gctx, h.o.LeaseStores, h.o.LeaseKey, q.now)
		return err
	})
	g.Go(func() (err error) {
		p.Rates, err = inspect.ReadRates(gctx, h.o.Database, h.o.Executions, q.now, rateMinutes)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	p.Charts = rateCharts(p.Rates)
	return p, nil
}

// executionsPage is one page of executions and the filters and order that chose it.
type executionsPage struct {
	Page       *inspect.ExecutionPage
	Statuses   []string // every status, for the filter
	Status     map[string]bool
	Definition string
	Parent     string
	Roots      bool
	Limit      int
	Sort       string // id, created or updated
	Desc       bool
	Sorts      []string // every order, for the form
	query      url.Values
}

func (p *executionsPage) report() any { return p.Page }

// SortBy is the address of the first page of the listing in order by: descending on a first
// click of a time's column (the newest first), then turning over on each click; ascending
// by id at first.
func (p *executionsPage) SortBy(by string) string {
	q := url.Values{}
	for k, v := range p.query {
		q[k] = v
	}
	q.Del("after")
	desc := by != string(inspect.SortByID)
	if by == p.Sort {
		desc = !p.Desc
	}
	q.Set("sort", by)
	q.Set("order", map[bool]string{false: "asc", true: "desc"}[desc])
	return "?" + q.Encode()
}

// defaultPageSize is the number of rows a listing shows unless ?limit= says otherwise.
const defaultPageSize = 50

func readExecutions(ctx context.Context, h *handler, q request) (any, error) {
	p := &executionsPage{Status: map[string]bool{}, Definition: q.param("definition"), Parent: q.param("parent"),
		Roots: q.flag("roots"), query: q.URL.Query()}
	for _, s := range contract.Statuses() {
		p.Statuses = append(p.Statuses, string(s))
	}
	for _, s := range inspect.ListSorts() {
		p.Sorts = append(p.Sorts, string(s))
	}
	order, err := inspect.ParseListSort(q.param("sort"))
	if err != nil {
		return nil, &badRequest{err.Error()}
	}
	p.Sort = string(order)
	switch q.param("order") {
	case "", "asc":
	case "desc":
		p.Desc = true
	default:
		return nil, &badRequest{"order must be asc or desc, got " + strconv.Quote(q.param("order"))}
	}
	lq := inspect.ListQuery{Definition: p.Definition, Parent: p.Parent, Roots: p.Roots, After: q.param("after"),
		Sort: order, Desc: p.Desc}
	for _, v := range q.URL.Query()["status"] {
		for _, s := range strings.Split(v, ",") {
			st := execstore.Status(strings.ToUpper(strings.TrimSpace(s)))
			if st == "" {
				continue
			}
			if !contract.ValidStatus(st) {
				return nil, &badRequest{"unknown status " + strconv.Quote(s)}
			}
			lq.Statuses = append(lq.Statuses, st)
			p.Status[string(st)] = true
		}
	}
	if lq.Limit, err = limitOf(q, defaultPageSize, contract.MaxListLimit); err != nil {
		return nil, err
	}
	p.Limit = lq.Limit
	p.Page, err = inspect.ListExecutions(ctx, h.executions(), lq)
	var bad *inspect.QueryError
	if errors.As(err, &bad) {
		return nil, &badRequest{bad.Msg}
	}
	return p, err
}

// childrenLimit bounds the children an execution's page lists: no index leads with the
// parent, so the find reads the collection in _id order until it has found as many.
const childrenLimit = 50

// executionPage is one execution, its children and whether bodies are shown.
type executionPage struct {
	Execution *inspect.Execution
	Children  *inspect.ExecutionPage
	// ChildrenLimit is the most children listed; more are on the executions page.
	ChildrenLimit int
	Body          bool
}

func (p *executionPage) report() any { return p.Execution }

func readExecution(ctx context.Context, h *handler, q request) (any, error) {
	trace := 10
	if s := q.param("trace"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, &badRequest{"trace must be a number of steps, got " + strconv.Quote(s)}
		}
		trace = n
	}
	eq := inspect.ExecutionQuery{ID: q.PathValue("id"), Trace: trace, Dedupe: q.flag("dedupe")}
	exe, err := inspect.ReadExecution(ctx, h.executions(), eq, q.now)
	if err != nil {
		return nil, err
	}
	p := &executionPage{Execution: exe, ChildrenLimit: childrenLimit, Body: q.flag("body")}
	if !p.Body {
		exe.Data = withoutBody(exe.Data)
		for i := range exe.Outbox {
			exe.Outbox[i].Event = withoutBody(exe.Outbox[i].Event)
		}
		for i := range exe.Spawns {
			exe.Spawns[i].Context = nil
		}
	}
	p.Children, err = inspect.ListExecutions(ctx, h.executions(), inspect.ListQuery{Parent: exe.ID, Limit: childrenLimit})
	return p, err
}

// withoutBody is p with its size and kind only.
func withoutBody(p inspect.Payload) inspect.Payload {
	return inspect.Payload{Bytes: p.Bytes, Kind: p.Kind}
}

// outboxPage is the oldest pending outbox entries.
type outboxPage struct {
	Outbox *inspect.Outbox
	Body   bool
}

func (p *outboxPage) report() any { return p.Outbox }

func readOutbox(ctx context.Context, h *handler, q request) (any, error) {
	limit, err := limitOf(q, 100, 100_000)
	if err != nil {
		return nil, err
	}
	r, err := inspect.ReadOutbox(ctx, h.executions(), limit)
	if err != nil {
		return nil, err
	}
	p := &outboxPage{Outbox: r, Body: q.flag("body")}
	if !p.Body {
		for i := range r.Entries {
			r.Entries[i].Event = withoutBody(r.Entries[i].Event)
		}
	}
	return p, nil
}

func readTimers(ctx context.Context, h *handler, q request) (any, error) {
	limit, err := limitOf(q, 100, 100_000)
	if err != nil {
		return nil, err
	}
	return inspect.ReadTimers(ctx, h.executions(), limit, q.now)
}

func readBacklog(ctx context.Context, h *handler, q request) (any, error) { return h.backlog(ctx, q) }

// relaysPage is the relays of one lease key, or without one asked for, the relays' and the
// sweepers' (their default keys) one beside the other.
type relaysPage struct {
	Sections []*inspect.Relays
	Asked    bool // a lease key was asked for
}

// report is the first section: what execstore relays -json prints for the same key.
func (p *relaysPage) report() any { return p.Sections[0] }

func readRelays(ctx context.Context, h *handler, q request) (any, error) {
	if key := q.param("lease-key"); key != "" {
		r, err := inspect.ReadRelaysIn(ctx, h.o.LeaseStores, key, q.now)
		if err != nil {
			return nil, err
		}
		return &relaysPage{Sections: []*inspect.Relays{r}, Asked: true}, nil
	}
	keys := []string{h.o.LeaseKey, h.o.SweeperLeaseKey}
	p := &relaysPage{Sections: make([]*inspect.Relays, len(keys))}
	g, gctx := errgroup.WithContext(ctx)
	for i, key := range keys {
		g.Go(func() (err error) {
			p.Sections[i], err = inspect.ReadRelaysIn(gctx, h.o.LeaseStores, key, q.now)
			return err
		})
	}
	return p, g.Wait()
}

// idemPage is one idempotency record, or a page of them under a prefix.
type idemPage struct {
	Record *inspect.IdemRecord // with ?key=
	List   *inspect.IdemPage   // without
	Key    string
	Prefix string
	Body   bool
}

func (p *idemPage) report() any {
	if p.Record != nil {
		return p.Record
	}
	return p.List
}

func readIdem(ctx context.Context, h *handler, q request) (any, error) {
	coll := h.o.Database.Collection(h.o.Idempotency)
	p := &idemPage{Key: q.param("key"), Prefix: q.URL.Query().Get("prefix"), Body: q.flag("body")}
	var err error
	if p.Key != "" {
		p.Record, err = inspect.GetIdem(ctx, coll, p.Key, p.Body, q.now)
		return p, err
	}
	limit, err := limitOf(q, defaultPageSize, contract.MaxListLimit)
	if err != nil {
		return nil, err
	}
	p.List, err = inspect.ListIdem(ctx, coll, inspect.IdemListQuery{Prefix: p.Prefix, Limit: limit, After: q.param("after")}, q.now)
	return p, err
}

// journalPage is one invocation, or before an id is given a page of invocations (by latest
// attempt state and owner) and what the journal's retention deleted.
type journalPage struct {
	ID         string
	Invocation *inspect.Invocation
	Query      inspect.InvocationQuery   // without an id only
	List       *inspect.InvocationPage   // without an id only
	States     []string                  // the states Query.State may name
	Retention  *inspect.JournalRetention // without an id only
	listed     bool                      // a listing's parameter was given: its JSON is the list
}

func (p *journalPage) report() any {
	switch {
	case p.ID != "":
		return p.Invocation
	case p.listed:
		return p.List
	}
	return p.Retention
}

func readJournal(ctx context.Context, h *handler, q request) (any, error) {
	p := &journalPage{ID: q.param("id"), States: inspect.InvocationStates}
	coll := h.o.Database.Collection(h.o.Journal)
	if p.ID != "" {
		var err error
		p.Invocation, err = inspect.ReadInvocation(ctx, coll, p.ID)
		return p, err
	}
	limit, err := limitOf(q, defaultPageSize, contract.MaxListLimit)
	if err != nil {
		return nil, err
	}
	values := q.URL.Query()
	p.listed = values.Has("state") || values.Has("owner") || values.Has("after") || values.Has("limit")
	p.Query = inspect.InvocationQuery{State: q.param("state"), Owner: q.param("owner"), Limit: limit, After: q.param("after")}
	if !inspect.ValidInvocationState(p.Query.State) {
		return nil, &badRequest{"state must be none, pending, succeeded, failed or unknown, got " + strconv.Quote(p.Query.State)}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		p.List, err = inspect.ListInvocations(gctx, coll, p.Query)
		return err
	})
	g.Go(func() (err error) {
		p.Retention, err = inspect.ReadJournalRetention(gctx, h.o.Database.Collection(ops.CountersCollection), h.o.Journal)
		return err
	})
	return p, g.Wait()
}

// executions is the executions collection.
func (h *handler) executions() *mongo.Collection { return h.o.Database.Collection(h.o.Executions) }

// backlog reads the backlog and the retention totals.
func (h *handler) backlog(ctx context.Context, q request) (*inspect.Backlog, error) {
	return inspect.ReadBacklog(ctx, h.executions(), h.o.Database.Collection(ops.CountersCollection), q.now)
}

// limitOf reads ?limit=, def when absent, between 1 and most.
func limitOf(q request, def, most int) (int, error) {
	s := q.param("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, &badRequest{"limit must be between 1 and " + strconv.Itoa(most) + ", got " + strconv.Quote(s)}
	}
	return n, nil
}

// rawJSON is raw JSON for a template, as text.
func rawJSON(b json.RawMessage) string { return string(b) }
