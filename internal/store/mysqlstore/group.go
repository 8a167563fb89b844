package mysqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Reports are committed in groups: the reports that arrive while a group
// commits go together in a next transaction (completers of them run side
// by side, each on a connection of its own), each under a savepoint of
// its own (a report's error rolls back its own changes only), so that one
// log flush acknowledges many. The plain reports of a group (see
// settleGroup) skip the savepoints: they are settled set-based, with one
// lock and one write for them all. An idle store sends a report alone, without
// a savepoint and with no added delay.

// maxGroup bounds the reports of one group, and completers is how many
// groups run at once.
const (
	maxGroup   = 64
	completers = 4
)

// report is a RunComplete waiting for its group.
type report struct {
	ctx  context.Context
	p    store.RunCompleteParams
	task *rota.Task
	err  error
	done chan struct{}
}

// RunComplete implements store.Store.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	r := &report{ctx: ctx, p: p, done: make(chan struct{})}
	select {
	case s.reports <- r:
	case <-s.closed:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once queued the report is applied: wait for its outcome even if ctx
	// ends, so that a committed report is never answered as failed.
	select {
	case <-r.done:
	case <-s.drained:
		select {
		case <-r.done:
		default:
			return nil, errClosed // queued after Close
		}
	}
	return r.task, r.err
}

// completer applies the queued reports in groups until the store closes.
func (s *Store) completer() {
	for {
		var r *report
		select {
		case r = <-s.reports:
		case <-s.closed:
			return
		}
		group := []*report{r}
	fill:
		for len(group) < maxGroup {
			select {
			case r := <-s.reports:
				group = append(group, r)
			default:
				break fill
			}
		}
		s.completeGroup(group)
		for _, r := range group {
			close(r.done)
		}
	}
}

// completeGroup applies a group of reports in one transaction; when that
// transaction fails as a whole (a deadlock past its retries, a lost
// connection), each report is applied again alone.
func (s *Store) completeGroup(group []*report) {
	ctx := context.WithoutCancel(group[0].ctx)
	if len(group) == 1 {
		r := group[0]
		r.err = s.tx(ctx, "complete", func(t *txn) error {
			var err error
			r.task, err = complete(t, r.p)
			return err
		})
		return
	}
	err := s.tx(ctx, "complete a group", func(t *txn) error {
		for _, r := range group {
			r.task, r.err = nil, nil
		}
		rest, err := settleGroup(t, group)
		if err != nil {
			return err
		}
		for i, r := range rest {
			sp := fmt.Sprintf("report_%d", i)
			if _, err := t.exec(`SAVEPOINT ` + sp); err != nil {
				return wrap("savepoint", err)
			}
			r.task, r.err = complete(t, r.p)
			var keep keepError
			switch {
			case r.err == nil:
			case errors.As(r.err, &keep):
				r.err = keep.err // its changes (an expiry on the spot) commit
			case retryable(r.err) || isConnError(r.err):
				return r.err // the transaction is lost: run the group again
			default:
				if _, err := t.exec(`ROLLBACK TO SAVEPOINT ` + sp); err != nil {
					return wrap("rollback to savepoint", err)
				}
				r.task = nil
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	for _, r := range group {
		s.completeGroup([]*report{r})
	}
}

// isConnError reports an error that lost the connection or the
// transaction (not a report's own fault).
func isConnError(err error) bool {
	var re *rota.Error
	return !errors.As(err, &re) && unavailable(err) != err
}
