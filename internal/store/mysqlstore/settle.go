package mysqlstore

import (
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// settledCols are the columns of a task row a report (or an expiry)
// writes, in the order of settledVals.
var settledCols = []string{"status", "done", "avail", "failures", "successes", "running", "run_at", "end_time",
	"message", "result", "updated_at", "run_status", "run_end", "run_lease", "run_message", "run_live"}

// settledVals are the values of settledCols for row, settled at now.
func settledVals(row *taskRow, now int64) []any {
	var result, live any
	if len(row.Result) > 0 {
		result = string(row.Result)
	}
	if row.run.status == string(rota.StatusRunning) {
		live = 1
	}
	return []any{string(row.Status), boolInt(row.Done), boolInt(row.Avail), row.Failures, row.Successes, row.Running,
		ms(row.RunAt), ms(row.EndTime), row.Message, result, now, row.run.status, row.run.end, row.run.lease,
		row.run.message, live}
}

// writeSettled writes the settled task rows (each at its instant in
// nows) in one statement: an UPDATE by id, or for several rows an UPDATE
// of the rows by id whose every column is a CASE on the id.
func writeSettled(t *txn, rows []*taskRow, nows []int64) error {
	if len(rows) == 1 {
		row := rows[0]
		args := append(settledVals(row, nows[0]), row.ID)
		if _, err := t.exec(`UPDATE tasks SET `+strings.Join(settledCols, " = ?, ")+` = ? WHERE id = ?`, args...); err != nil {
			return wrap("settle task "+row.ID, err)
		}
		return nil
	}
	vals := make([][]any, len(rows))
	for i, row := range rows {
		vals[i] = settledVals(row, nows[i])
	}
	var q strings.Builder
	args := make([]any, 0, (2*len(settledCols)+1)*len(rows))
	q.WriteString(`UPDATE tasks SET `)
	for c, col := range settledCols {
		if c > 0 {
			q.WriteString(`, `)
		}
		q.WriteString(col + ` = CASE id`)
		for i, row := range rows {
			q.WriteString(` WHEN ? THEN ?`)
			args = append(args, row.ID, vals[i][c])
		}
		q.WriteString(` END`)
	}
	q.WriteString(` WHERE id IN (?` + strings.Repeat(`, ?`, len(rows)-1) + `)`)
	for _, row := range rows {
		args = append(args, row.ID)
	}
	if _, err := t.exec(q.String(), args...); err != nil {
		return wrap("settle tasks", err)
	}
	return nil
}

// settleGroup applies the reports of a group that need nothing beyond
// their task's row set-based: one SELECT … FOR UPDATE locks the tasks
// whose row holds one of the group's runs, each report that passes the
// checks on it (its worker's run, still running, within its lease and
// deadline; a task of one worker whose runs all live in its row, without
// dependents; the group's first report of its run) is settled in memory
// as complete settles it, and one UPDATE writes them all. It returns the
// reports it left for the per-report path (in their order), which fence,
// expire and fail exactly as a lone report does.
func settleGroup(t *txn, group []*report) ([]*report, error) {
	ids := make([]any, len(group))
	for i, r := range group {
		ids[i] = r.p.RunID
	}
	rows, err := t.QueryContext(t.ctx, `SELECT `+taskCols+`, COALESCE((SELECT k.max_running FROM kinds k WHERE k.name = tasks.kind), 0)
		FROM tasks WHERE run_id IN (?`+strings.Repeat(`, ?`, len(ids)-1)+`) FOR UPDATE`, ids...)
	held, err := collect(rows, err, "lock reported runs", func(sc scanner) (*heldRun, error) {
		var h heldRun
		var err error
		h.task, err = scanTask(scanFunc(func(dest ...any) error { return sc.Scan(append(dest, &h.kindCap)...) }))
		return &h, err
	})
	if err != nil {
		return nil, err
	}
	byRun := make(map[string]*heldRun, len(held))
	for _, h := range held {
		byRun[h.task.run.id] = h
	}
	var (
		rest    []*report
		fast    []*report
		settled []*heldRun
		nows    []int64
		states  []store.Settled
	)
	for _, r := range group {
		h := byRun[r.p.RunID]
		if !plainReport(h, r.p) {
			rest = append(rest, r)
			continue
		}
		delete(byRun, r.p.RunID) // a second report of the run goes the slow way
		status, run := store.ReportSettle(r.p, h.task.run.stop == 1)
		_, st, err := endRun(t, h, status, r.p.Message, run)
		if err != nil {
			return nil, err
		}
		fast, settled, nows, states = append(fast, r), append(settled, h), append(nows, ms(r.p.Now)), append(states, st)
	}
	if len(fast) == 0 {
		return rest, nil
	}
	taskRows := make([]*taskRow, len(settled))
	for i, h := range settled {
		taskRows[i] = h.task
	}
	if err := writeSettled(t, taskRows, nows); err != nil {
		return nil, err
	}
	for i, r := range fast {
		row := settled[i].task
		if err := afterSettle(t, row, false, states[i], nows[i]); err != nil {
			return nil, err
		}
		row.Runs = []rota.Run{row.rotaRun()}
		r.task = &row.Task
	}
	return rest, nil
}

// plainReport reports whether report p on the locked task of h (nil when
// no task row holds its run) can be settled set-based: the checks of
// ownedRun pass, the task is not done, has one worker, no dependents and
// no runs in run_history (so that withRuns reads nothing).
func plainReport(h *heldRun, p store.RunCompleteParams) bool {
	if h == nil {
		return false
	}
	row := h.task
	if row.run.worker != p.WorkerID || row.run.status != string(rota.StatusRunning) || row.Done ||
		row.Workers > 1 || row.Attempt != 1 || row.dependents > 0 {
		return false
	}
	return store.RunExpiresAt(row.run.lease, row.run.deadline) > ms(p.Now)
}
