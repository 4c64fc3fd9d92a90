package ui

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/inspect"
)

// deadPage is one page of dead items and the filters that chose it.
type deadPage struct {
	Page      *inspect.DeadPage
	Kind      string
	Execution string
}

func (p *deadPage) report() any { return p.Page }

func readDead(ctx context.Context, h *handler, q request) (any, error) {
	limit, err := limitOf(q, 100, 10_000)
	if err != nil {
		return nil, err
	}
	p := &deadPage{Kind: q.param("kind"), Execution: q.param("execution")}
	dq := execstore.DeadQuery{ExecutionID: p.Execution, Limit: limit, Cursor: q.param("cursor")}
	if p.Kind != "" {
		dq.Kinds = []execstore.ItemKind{execstore.ItemKind(p.Kind)}
	}
	if err := inspect.ValidateDeadQuery(&dq); err != nil {
		return nil, &badRequest{err.Error()}
	}
	p.Page, err = inspect.ListDead(ctx, h.executions(), dq)
	return p, err
}
