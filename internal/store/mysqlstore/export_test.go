package mysqlstore

import (
	"context"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// CompleteGroup applies reports as one group of the completer would (one
// transaction), bypassing the queue, so that tests reach the group path
// whatever the timing.
func CompleteGroup(s *Store, ctx context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error) {
	group := make([]*report, len(ps))
	for i, p := range ps {
		group[i] = &report{ctx: ctx, p: p, done: make(chan struct{})}
	}
	s.completeGroup(group)
	tasks, errs := make([]*rota.Task, len(ps)), make([]error, len(ps))
	for i, r := range group {
		tasks[i], errs[i] = r.task, r.err
	}
	return tasks, errs
}
