package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// The grouped report's completeFind reads only what the report does not
// decide.
//
// The report gives every task and run it settles their settled values,
// and completeFind's WHERE clause pins others (one worker, not stopped,
// the run the row's); reading those cost the writer a call into SQLite
// per column and row (two, with the column's type). So the statement
// returns the other columns (settledCols) and settledScan.settle fills in
// the rest from the report, as settleCols settles it.

// settledPinned are the columns of store.TaskColumns whose value after a
// grouped report follows from the report: each sets its scan destination
// (store.TaskScan.Dest) from the settled task.
var settledPinned = map[string]func(dest any, st store.Settled){
	"status":         func(d any, st store.Settled) { *d.(*rota.Status) = st.Status },
	"done":           func(d any, st store.Settled) { *d.(*bool) = st.Done },
	"avail":          func(d any, st store.Settled) { *d.(*bool) = st.Avail },
	"successes":      func(d any, st store.Settled) { *d.(*int) = st.Successes },
	"running":        func(d any, _ store.Settled) { *d.(*int) = 0 },
	"workers":        func(d any, _ store.Settled) { *d.(*int) = 1 },
	"stop_requested": func(d any, _ store.Settled) { *d.(*bool) = false },
	"end_time":       func(d any, st store.Settled) { *d.(*int64) = ms(st.EndTime) },
	"message":        func(d any, st store.Settled) { *d.(*string) = st.Message },
}

// settledRead and settledSet are the positions, in store.TaskColumns, of
// the columns the statement returns and of those settledScan.settle fills in.
var settledRead, settledSet = func() (read, set []int) {
	for i, c := range taskColumns {
		if settledPinned[c] != nil {
			set = append(set, i)
		} else {
			read = append(read, i)
		}
	}
	return read, set
}()

// settledCols is what completeFind returns: the run id (which report
// the row answers), the task columns of settledRead, and the run's
// columns that the report does not set, with its lease (checked against
// the report's instant by settledScan.live).
var settledCols = func() string {
	cols := []string{"run_id"}
	for _, i := range settledRead {
		cols = append(cols, quoted(taskColumns[i]))
	}
	return strings.Join(append(cols, "run_start", "run_deadline", "run_lease", "dependents"), ", ")
}()

// taskColumns are the names of store.TaskColumns ("key" unquoted).
var taskColumns = func() []string {
	var out []string
	for _, c := range strings.Split(taskCols, ",") {
		out = append(out, strings.Trim(strings.TrimSpace(c), `"`))
	}
	return out
}()

// quoted returns column c of store.TaskColumns as SQL names it.
func quoted(c string) string {
	if c == "key" {
		return `"key"`
	}
	return c
}

// settledScan is what completeChunk reads of a row of settledCols, and
// then the report it settled: completeChunk allocates those of a group
// in one slice, where each row took a dozen allocations of its own.
type settledScan struct {
	ts                                 store.TaskScan
	workerIDs                          sql.NullString
	runID                              string
	start, deadline, lease, dependents int64
	dest                               []any // ts.Dest
	row                                taskRow
	run                                runRow
	rep                                report
}

// scan reads a row of settledCols into sc (read: a buffer for the scan
// destinations, returned for the next row).
func (sc *settledScan) scan(rows scanner, read []any) ([]any, error) {
	sc.dest = sc.ts.Dest(&sc.workerIDs)
	read = append(read[:0], &sc.runID)
	for _, i := range settledRead {
		read = append(read, sc.dest[i])
	}
	read = append(read, &sc.start, &sc.deadline, &sc.lease, &sc.dependents)
	return read, rows.Scan(read...)
}

// live reports whether the run sc read is still held at the instant of
// report p: its lease and deadline (if any) after it. A report of a run
// that lapsed takes the general path, which expires it.
func (sc *settledScan) live(p store.RunCompleteParams) bool {
	now := ms(p.Now)
	return sc.lease > now && (sc.deadline == 0 || sc.deadline > now)
}

// settle completes the report for the run sc read, of params p: the
// task and run as scanRowRun reads them after the report.
func (sc *settledScan) settle(p store.RunCompleteParams) (*report, error) {
	status, st := settleSuccess(p)
	for _, i := range settledSet {
		settledPinned[taskColumns[i]](sc.dest[i], st)
	}
	sc.row = sc.ts.Row(nil)
	t := &sc.row
	if len(st.Result) > 0 {
		t.Result = st.Result // the report's result replaces the row's
	}
	if sc.workerIDs.Valid {
		if err := json.Unmarshal([]byte(sc.workerIDs.String), &t.WorkerIDs); err != nil {
			return nil, fmt.Errorf("task %s: decode worker_ids: %w", t.ID, err)
		}
	}
	now := ms(p.Now)
	r := &sc.run
	*r = runRow{kind: t.Kind, inRow: true}
	r.ID, r.TaskID, r.WorkerID, r.WorkerAddress, r.Attempt = sc.runID, t.ID, p.WorkerID, t.WorkerAddress, t.Attempt
	r.Status, r.Message = status, p.Message
	r.StartTime, r.EndTime, r.LeaseExpiresAt, r.Deadline = tm(sc.start), tm(now), tm(0), tm(sc.deadline)
	sc.rep = report{run: r, task: t, dependents: int(sc.dependents)}
	return &sc.rep, nil
}

// settleSuccess is the run's status and the task's settled state after
// success report p on a single-worker task with no other run, as
// settleCols and completeInRow store them.
func settleSuccess(p store.RunCompleteParams) (rota.Status, store.Settled) {
	status, run := store.ReportSettle(p, false)
	return status, store.Settle(store.SettleTask{Workers: 1}, run) // successes 0, no other run
}
