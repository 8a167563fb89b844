package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Reports (RunComplete) are the hottest write of a busy cluster: one per
// task, where claims and inserts come in batches. Each would be its own
// transaction, and with synchronous commit each transaction waits for its
// WAL flush, so a node's report rate would be bounded by its pool size
// divided by the flush time. Instead reports are committed in groups: a
// report waits for one of a few completers, and a completer takes every
// report that queued while it was busy and settles them all in one
// transaction (locks in one statement, writes and reads back in one
// pipeline, one commit). When the node is idle a report finds a completer
// waiting and goes alone, with no added delay; under load the groups grow
// with the load, as in sqlitestore's group commit.

// completers is how many groups of reports may be in flight at once: enough
// that one group gathers while another commits, few enough to leave the
// pool's other connections to claims and inserts.
const completers = 2

// maxCompleteGroup caps a group (a statement's array parameters and one
// transaction's row locks).
const maxCompleteGroup = 500

// completeReq is one report waiting for a completer. res has room for the
// answer, which a completer always sends.
type completeReq struct {
	ctx context.Context
	p   store.RunCompleteParams
	res chan completeRes
}

type completeRes struct {
	task *rota.Task
	err  error
}

// RunComplete implements store.Store. Reports are committed in groups (see
// above); each keeps the semantics of its own transaction: its errors are
// its own, and a report that finds its lease lapsed expires the run in the
// group's transaction.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	req := &completeReq{ctx: ctx, p: p, res: make(chan completeRes, 1)}
	select {
	case s.completeQ <- req:
	case <-ctx.Done():
		return nil, s.translate("complete run", ctx.Err())
	case <-s.closed:
		return nil, s.translate("complete run", net.ErrClosed)
	}
	// A completer answers every report it took, commit or not; waiting
	// here (and not on ctx) means a caller is never told that a report
	// failed when it committed.
	r := <-req.res
	return r.task, r.err
}

// completer settles groups of reports until the store closes.
func (s *Store) completer() {
	defer s.completersDone.Done()
	for {
		var first *completeReq
		select {
		case first = <-s.completeQ:
		case <-s.closed:
			return
		}
		group := []*completeReq{first}
	gather:
		for len(group) < maxCompleteGroup {
			select {
			case r := <-s.completeQ:
				group = append(group, r)
			default:
				break gather
			}
		}
		s.completeGroup(group)
	}
}

// completeGroup settles a group of reports and answers each of them.
func (s *Store) completeGroup(group []*completeReq) {
	live := group[:0:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.res <- completeRes{err: s.translate("complete run", err)}
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		t, err := s.completeOne(live[0].ctx, live[0].p)
		live[0].res <- completeRes{t, err}
		return
	}
	res, err := s.completeMany(live)
	if err != nil {
		// The group's transaction failed as a whole (a lost connection, a
		// deadlock retried too often): nothing of it committed. Each report
		// goes again on its own, so that one report's trouble is only its
		// own.
		for _, r := range live {
			t, err := s.completeOne(r.ctx, r.p)
			r.res <- completeRes{t, err}
		}
		return
	}
	for i, r := range live {
		r.res <- res[i]
	}
}

// completeMany settles several reports in one transaction, each as
// completeOne would (in order, so that two reports on one task see each
// other's effect). Per-report errors are in the results; the error is the
// transaction's.
func (s *Store) completeMany(group []*completeReq) ([]completeRes, error) {
	res := make([]completeRes, len(group))
	ctx := context.WithoutCancel(group[0].ctx)
	err := s.tx(ctx, "complete runs", func(t *txn) error {
		clear(res)
		runIDs := make([]string, 0, len(group))
		for _, r := range group {
			runIDs = append(runIDs, r.p.RunID)
		}
		slices.Sort(runIDs)
		runIDs = slices.Compact(runIDs)
		tasks := make(map[string]*taskRow, len(runIDs))
		runs := make(map[string]*runRow, len(runIDs))
		// The tasks' locks, in id order (as every multi-task lock of the
		// store takes them), then their runs: current once the locks are
		// held.
		t.queue(`SELECT `+taskCols+`, COALESCE((SELECT max_running FROM kinds WHERE name = tasks.kind), 0)
			FROM tasks WHERE id IN (SELECT task_id FROM runs WHERE id = ANY ($1))
			ORDER BY id FOR NO KEY UPDATE OF tasks`, runIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var kindCap int
				task, err := scanTask(rows, &kindCap)
				if err != nil {
					return err
				}
				task.kindCap = kindCap
				tasks[task.ID] = task
			}
			return rows.Err()
		})
		t.queue(`SELECT `+runCols+` FROM runs WHERE id = ANY ($1)`, runIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				r, err := scanRun(rows)
				if err != nil {
					return err
				}
				runs[r.ID] = r
			}
			return rows.Err()
		})
		if err := t.flush(ctx); err != nil {
			return fmt.Errorf("lock runs: %w", err)
		}
		for i, req := range group {
			p := req.p
			r := runs[p.RunID]
			var task *taskRow
			if r != nil {
				task = tasks[r.TaskID]
			}
			if task == nil {
				res[i].err = notFound("run", p.RunID)
				continue
			}
			if err := checkOwned(t, task, r, p.WorkerID, ms(p.Now), p.Backoff); err != nil {
				var k keepError
				if errors.As(err, &k) {
					err = k.err
				}
				res[i].err = err
				continue
			}
			applyReport(t, task, r, p)
			queueTaskWithRuns(t, task.ID, &res[i].task)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
