package ui

import (
	"context"
	"time"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/inspect"
)

// deadPage is the dead items a filter selects, newest first and by last error, and the
// filter.
type deadPage struct {
	Selection  *inspect.DeadSelection
	Kind       string
	Execution  string
	Definition string
	Error      string
	OlderThan  string
	Body       bool // the events' first bytes are shown
}

func (p *deadPage) report() any { return p.Selection }

func readDead(ctx context.Context, h *handler, q request) (any, error) {
	limit, err := limitOf(q, 100, inspect.MaxDeadSelected)
	if err != nil {
		return nil, err
	}
	f, err := deadFilterOf(q.param, q.now)
	if err != nil {
		return nil, &badRequest{err.Error()}
	}
	f.Limit = limit
	p := &deadPage{Kind: q.param("kind"), Execution: f.ExecutionID, Definition: f.Definition, Error: f.ErrorContains,
		OlderThan: q.param("older-than"), Body: q.flag("body")}
	if p.Selection, err = inspect.SelectDead(ctx, h.executions(), f); err != nil {
		return nil, err
	}
	if !p.Body {
		for i := range p.Selection.Items {
			p.Selection.Items[i].EventStart = ""
		}
	}
	return p, nil
}

// deadFilterOf is the dead items' filter that the parameters get reads give (kind,
// execution, definition, error, older-than: a Go duration before now), checked.
func deadFilterOf(get func(string) string, now time.Time) (inspect.DeadFilter, error) {
	f := inspect.DeadFilter{ExecutionID: get("execution"), Definition: get("definition"), ErrorContains: get("error")}
	f.Kinds = inspect.ParseKinds(get("kind"))
	if s := get("older-than"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return f, contract.Invalid("older-than", "is %q, not a duration such as 90m or 24h", s)
		}
		f.DeadBefore = now.Add(-d)
	}
	if err := inspect.ValidateDeadFilter(&f); err != nil {
		return f, err
	}
	return f, nil
}
