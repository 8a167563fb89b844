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

// maxCompleteGroup bounds a group (a statement's array parameters and one
// transaction's row locks): a group takes no more requests once it holds
// that many reports, so it holds fewer than twice that many.
const maxCompleteGroup = 500

// completeReq is one report waiting for a completer, the i-th of its
// request's. res (shared by the request's reports) has room for every
// answer, which a completer always sends, with answer.
type completeReq struct {
	ctx context.Context
	p   store.RunCompleteParams
	i   int
	res chan completeRes
}

type completeRes struct {
	task *rota.Task
	err  error
	i    int // the index of the report answered (set by answer)
}

// answer sends r's answer.
func (r *completeReq) answer(res completeRes) {
	res.i = r.i
	r.res <- res
}

// RunComplete implements store.Store. Reports are committed in groups (see
// above); each keeps the semantics of its own transaction: its errors are
// its own, and a report that finds its lease lapsed expires the run in the
// group's transaction.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	tasks, errs := s.RunCompleteMany(ctx, []store.RunCompleteParams{p})
	return tasks[0], errs[0]
}

// RunCompleteMany settles reports that came together (one request of a
// worker) as RunComplete would each, answering ps[i] with tasks[i] or
// errs[i]. They join a completer's group as one (up to maxCompleteGroup
// at a time), so that a request's reports share a statement even when a
// completer is idle: sent one by one, the first went alone and the rest
// made the next group (measured at 500 tasks/s: ~0.7 report statements a
// task for ~0.23 report requests).
func (s *Store) RunCompleteMany(ctx context.Context, ps []store.RunCompleteParams) (tasks []*rota.Task, errs []error) {
	tasks, errs = make([]*rota.Task, len(ps)), make([]error, len(ps))
	// One array of requests and one channel for all (a report's own were
	// two allocations of the hottest path).
	res := make(chan completeRes, len(ps))
	slab := make([]completeReq, len(ps))
	reqs := make([]*completeReq, len(ps))
	for i, p := range ps {
		slab[i] = completeReq{ctx: ctx, p: p, i: i, res: res}
		reqs[i] = &slab[i]
	}
	sent := 0
	for sent < len(reqs) {
		unit := reqs[sent:min(sent+maxCompleteGroup, len(reqs))]
		var err error
		select {
		case s.completeQ <- unit:
			sent += len(unit)
			continue
		case <-ctx.Done():
			err = s.translate("complete run", ctx.Err())
		case <-s.closed:
			err = s.translate("complete run", net.ErrClosed)
		}
		for i := sent; i < len(reqs); i++ {
			errs[i] = err
		}
		break
	}
	// A completer answers every report it took, commit or not; waiting
	// here (and not on ctx) means a caller is never told that a report
	// failed when it committed.
	for range sent {
		r := <-res
		tasks[r.i], errs[r.i] = r.task, r.err
	}
	return tasks, errs
}

// completer settles groups of reports until the store closes.
func (s *Store) completer() {
	defer s.completersDone.Done()
	serveGroups(s, s.completeQ, maxCompleteGroup, func(u []*completeReq) int { return len(u) },
		func(units [][]*completeReq) { s.completeGroup(slices.Concat(units...)) })
}

// completeGroup settles a group of reports and answers each of them.
func (s *Store) completeGroup(group []*completeReq) {
	live := liveRequests(group, func(r *completeReq) context.Context { return r.ctx },
		func(r *completeReq, err error) { r.answer(completeRes{err: s.translate("complete run", err)}) })
	fast := s.completeFast(live)
	rest := live[:0:0]
	for i, r := range live {
		if fast[i] != nil {
			r.answer(completeRes{task: fast[i]})
			continue
		}
		rest = append(rest, r)
	}
	live = rest
	switch len(live) {
	case 0:
		return
	case 1:
		t, err := s.completeOne(live[0].ctx, live[0].p)
		live[0].answer(completeRes{task: t, err: err})
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
			r.answer(completeRes{task: t, err: err})
		}
		return
	}
	for i, r := range live {
		r.answer(res[i])
	}
}

// completeMany settles several reports in one transaction (those
// completeFast did not settle), each as
// completeOne would, in order, so that two reports on one task see each
// other's effect; each report is answered with its task as the group left
// it. Per-report errors are in the results; the error is the
// transaction's.
//
// The group costs two round trips and a handful of statements, whatever
// its size: the tasks' locks and the runs in one, then a statement for
// all the runs that ended, one for all the tasks (their whole state, as
// settled in memory), and one read of the tasks with their runs, with
// COMMIT.
func (s *Store) completeMany(group []*completeReq) ([]completeRes, error) {
	res := make([]completeRes, len(group))
	ctx := context.WithoutCancel(group[0].ctx)
	var (
		reported []string              // task id of each settled report
		read     map[string]*rota.Task // the tasks as the group left them
	)
	err := s.tx(ctx, "complete runs", func(t *txn) error {
		clear(res)
		runIDs := make([]string, 0, len(group))
		for _, r := range group {
			runIDs = append(runIDs, r.p.RunID)
		}
		slices.Sort(runIDs)
		runIDs = slices.Compact(runIDs)
		tasks, g, err := lockGroup(ctx, t, runIDs)
		if err != nil {
			return err
		}
		reported = applyGroup(t, g, tasks, group, res)
		g.queue(t)
		read = queueReadBack(t, reported, tasks, g)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, id := range reported {
		if id == "" {
			continue
		}
		task := read[id]
		if task == nil {
			return nil, fmt.Errorf("complete runs: task %s vanished", id)
		}
		c := *task // each answer its own
		res[i].task = &c
	}
	return res, nil
}

// lockGroup takes the locks of the tasks of the runs runIDs (sorted), in
// id order (as every multi-task lock of the store takes them), reading
// with them the runs kept in their rows: one round trip. The runs of
// run_log among runIDs (multi-worker tasks, runs older than the lean
// store) are read after, current once the locks are held: a second round
// trip, only when there are some. It returns the tasks by id and the
// group's writes holding the runs.
func lockGroup(ctx context.Context, t *txn, runIDs []string) (map[string]*taskRow, *groupWrites, error) {
	tasks := make(map[string]*taskRow, len(runIDs))
	g := &groupWrites{runs: make(map[string]*runRow, len(runIDs))}
	wanted := make(map[string]bool, len(runIDs))
	for _, id := range runIDs {
		wanted[id] = true
	}
	t.queue(`SELECT `+taskCols+`, `+lockedTaskCols+`
		FROM tasks WHERE id IN (SELECT task_id FROM runs WHERE id = ANY ($1))
		ORDER BY id FOR NO KEY UPDATE OF tasks`, runIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			task, run, err := scanLockedTask(rows)
			if err != nil {
				return err
			}
			tasks[task.ID] = task
			if run != nil && wanted[run.ID] {
				g.runs[run.ID] = run
			}
		}
		return rows.Err()
	})
	if err := t.flush(ctx); err != nil {
		return nil, nil, fmt.Errorf("lock runs: %w", err)
	}
	var rest []string
	for _, id := range runIDs {
		if g.runs[id] == nil {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return tasks, g, nil
	}
	err := t.query(ctx, func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return err
			}
			g.runs[r.ID] = r
		}
		return rows.Err()
	}, `SELECT `+runCols+` FROM runs WHERE id = ANY ($1) AND NOT in_row`, rest)
	if err != nil {
		return nil, nil, fmt.Errorf("read runs: %w", err)
	}
	return tasks, g, nil
}

// applyGroup settles the group's reports in order into g (in memory),
// each report's refusal in res, and returns the task id of each settled
// report ("" for a refused one).
func applyGroup(t *txn, g *groupWrites, tasks map[string]*taskRow, group []*completeReq, res []completeRes) []string {
	t.group = g
	defer func() { t.group = nil }()
	reported := make([]string, len(group))
	for i, req := range group {
		p := req.p
		r := g.runs[p.RunID]
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
		reported[i] = task.ID
	}
	return reported
}

// queueReadBack returns the reported tasks as the group left them, by
// id: those settledTask can answer from memory, and the others read back
// with their runs by a statement it queues (it goes with COMMIT, after
// the writes; none when every answer is in memory).
func queueReadBack(t *txn, reported []string, tasks map[string]*taskRow, g *groupWrites) map[string]*rota.Task {
	read := make(map[string]*rota.Task, len(reported))
	rowRuns := make(map[string]*runRow, len(g.runs))
	for _, r := range g.runs {
		if r.inRow {
			rowRuns[r.TaskID] = r
		}
	}
	var ids []string
	for _, id := range reported {
		if _, dup := read[id]; id == "" || dup {
			continue
		}
		if r := rowRuns[id]; r != nil {
			if task := settledTask(tasks[id], r); task != nil {
				read[id] = task
				continue
			}
		}
		read[id] = nil
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		t.queue(tasksWithRunsSQL, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				task, err := scanTaskWithRuns(rows, "")
				if err != nil {
					return err
				}
				read[task.ID] = task
			}
			return rows.Err()
		})
	}
	return read
}

// groupWrites collects what a group of reports changes (endRun and settle
// record into it while txn.group is set), to be written with one
// statement per table.
type groupWrites struct {
	runs      map[string]*runRow // the group's runs, as loaded and changed
	ended     []*runRow          // runs that ended, once each
	endedSeen map[string]bool
	tasks     []*taskRow // tasks settled, once each
	updated   map[string]int64
	drops     [][2]string // (task id, worker id) to take off the task's holders
	stops     []string    // tasks whose other RUNNING runs must stop
}

func (g *groupWrites) endRun(r *runRow) {
	if g.endedSeen == nil {
		g.endedSeen = map[string]bool{}
	}
	if !g.endedSeen[r.ID] {
		g.endedSeen[r.ID] = true
		g.ended = append(g.ended, r)
	}
}

// settled records that settle moved t (its state in memory is what to
// store) at now, taking worker off its holders when drop.
func (g *groupWrites) settled(t *taskRow, worker string, drop bool, now int64) {
	if g.updated == nil {
		g.updated = map[string]int64{}
	}
	if _, ok := g.updated[t.ID]; !ok {
		g.tasks = append(g.tasks, t)
	}
	g.updated[t.ID] = now
	if drop {
		g.drops = append(g.drops, [2]string{t.ID, worker})
	}
}

// stopOthers records that the RUNNING runs of task must stop, and marks
// those of the group so that their reports, later in the group, see it.
func (g *groupWrites) stopOthers(task string) {
	g.stops = append(g.stops, task)
	for _, r := range g.runs {
		if r.TaskID == task && r.Status == rota.StatusRunning {
			r.StopRequested = true
		}
	}
}

// queue queues the group's writes.
func (g *groupWrites) queue(t *txn) {
	if n := len(g.ended); n > 0 {
		ids, statuses, ends, msgs := make([]string, n), make([]string, n), make([]int64, n), make([]string, n)
		stop := make([]bool, n)
		for i, r := range g.ended {
			ids[i], statuses[i], ends[i], msgs[i], stop[i] = r.ID, string(r.Status), ms(r.EndTime), r.Message, r.StopRequested
		}
		// stop_requested too: a run that a report of the group stopped
		// (stopOthers) and that ended later in the group keeps the mark.
		t.queue(`UPDATE run_log SET status = u.status, end_time = u.end_time, expires_at = 0, lease_expires_at = 0,
				message = u.message, stop_requested = u.stop
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bool[]) AS u(id, status, end_time, message, stop)
			WHERE run_log.id = u.id`, ids, statuses, ends, msgs, stop)
	}
	if len(g.stops) > 0 {
		t.queue(`UPDATE run_log SET stop_requested = true WHERE task_id = ANY ($1) AND status = 'RUNNING'`, g.stops)
	}
	n := len(g.tasks)
	if n == 0 {
		return
	}
	var (
		ids, statuses, msgs          = make([]string, n), make([]string, n), make([]string, n)
		avail                        = make([]bool, n)
		failures, successes, running = make([]int32, n), make([]int32, n), make([]int32, n)
		runAt, endTime, updated      = make([]int64, n), make([]int64, n), make([]int64, n)
		results                      = make([]*string, n)
		dropTasks, dropWorkers       []string
	)
	for i, task := range g.tasks {
		ids[i], statuses[i], msgs[i] = task.ID, string(task.Status), task.Message
		avail[i] = task.Avail
		failures[i], successes[i], running[i] = int32(task.Failures), int32(task.Successes), int32(task.Running)
		runAt[i], endTime[i], updated[i] = ms(task.RunAt), ms(task.EndTime), g.updated[task.ID]
		if len(task.Result) > 0 {
			r := string(task.Result)
			results[i] = &r
		}
	}
	for _, d := range g.drops {
		dropTasks, dropWorkers = append(dropTasks, d[0]), append(dropWorkers, d[1])
	}
	rr := g.rowRuns()
	t.queue(`UPDATE tasks SET status = u.status, avail = u.avail, failures = u.failures, successes = u.successes,
			running = u.running, run_at = u.run_at, end_time = u.end_time, message = u.message,
			result = u.result::json, updated_at = u.updated_at,
			run_status = COALESCE(rr.status, run_status), run_end = COALESCE(rr.end_time, run_end),
			run_lease = CASE WHEN rr.status IS NOT NULL AND rr.status <> 'RUNNING' THEN 0 ELSE run_lease END,
			run_message = COALESCE(rr.message, run_message), run_stop = COALESCE(rr.stop, run_stop),
			holders = CASE WHEN tasks.id = ANY ($12::text[]) THEN ARRAY(
				SELECT h FROM unnest(tasks.holders) AS h
				WHERE NOT EXISTS (SELECT 1 FROM unnest($12::text[], $13::text[]) AS d(task_id, worker_id)
					WHERE d.task_id = tasks.id AND d.worker_id = h)) ELSE tasks.holders END
		FROM unnest($1::text[], $2::text[], $3::bool[], $4::int[], $5::int[], $6::int[], $7::bigint[], $8::bigint[],
			$9::text[], $10::text[], $11::bigint[])
			AS u(id, status, avail, failures, successes, running, run_at, end_time, message, result, updated_at)
			LEFT JOIN unnest($14::text[], $15::text[], $16::bigint[], $17::text[], $18::bool[])
				AS rr(task_id, status, end_time, message, stop) ON rr.task_id = u.id
		WHERE tasks.id = u.id`,
		ids, statuses, avail, failures, successes, running, runAt, endTime, msgs, results, updated,
		dropTasks, dropWorkers, rr.tasks, rr.statuses, rr.ends, rr.msgs, rr.stops)
}

// rowRunCols are the runs kept in task rows that a group loaded, as
// column arrays: their state in memory, to be stored with their tasks.
type rowRunCols struct {
	tasks, statuses, msgs []string
	ends                  []int64
	stops                 []bool
}

// rowRuns returns the group's runs kept in task rows (at most one per
// task: the row holds one).
func (g *groupWrites) rowRuns() rowRunCols {
	c := rowRunCols{tasks: []string{}, statuses: []string{}, msgs: []string{}, ends: []int64{}, stops: []bool{}}
	for _, r := range g.runs {
		if !r.inRow {
			continue
		}
		c.tasks, c.statuses, c.msgs = append(c.tasks, r.TaskID), append(c.statuses, string(r.Status)), append(c.msgs, r.Message)
		c.ends, c.stops = append(c.ends, ms(r.EndTime)), append(c.stops, r.StopRequested)
	}
	return c
}
