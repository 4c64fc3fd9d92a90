package opsrun

import (
	"context"
	"fmt"

	"github.com/execstore/execstore/ops"
)

// EnsureIndexes creates ops.Indexes if they are missing, then drops ops.ObsoleteIndexes if
// present. Creating an existing index is a no-op, and so is dropping a missing one, so every
// process may call it at start. One createIndexes per index: FerretDB 1.24.2 drops the
// connection on a createIndexes that names several indexes some of which exist.
func EnsureIndexes(ctx context.Context, env Env) error {
	for _, m := range ops.Indexes() {
		if _, err := env.Executions.Indexes().CreateOne(ctx, m); err != nil {
			return fmt.Errorf("execstore: creating index on %v: %w", m.Keys, err)
		}
	}
	return dropObsoleteIndexes(ctx, env)
}
