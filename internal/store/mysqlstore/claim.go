package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskClaim implements store.Store. The dispatch rules are documented on
// store.TaskClaimParams.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	var res store.TaskClaimResult
	err := s.tx(ctx, "claim", func(t *txn) error {
		res = store.TaskClaimResult{}
		now := ms(p.Now)
		drain, err := workerSeen(t, p, now)
		if err != nil || drain {
			res.Drain = drain
			return err
		}
		for _, kind := range p.Kinds {
			left := p.Max - len(res.Runs)
			if left <= 0 {
				break
			}
			runs, limited, err := claimKind(t, p, kind, left, now)
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, runs...)
			res.RateLimit(limited)
		}
		return nil
	})
	return res, err
}

// seenGrain is how stale a worker's recorded last sighting may be: a
// claim or heartbeat within a second of the last recorded one writes
// nothing to the worker's row (unless its address, kinds, wait or
// registration change), so that a busy worker does not cost a row write
// per claim, as on PostgreSQL. It is small beside store.WorkerLiveness.
const seenGrain = 1000 // ms

// workerSeen records the claiming worker (its kinds accumulate up to
// store.MaxWorkerKinds) and reports whether it must drain. It locks the
// worker's row (its kinds merge in Go) and writes it only when something
// changed or its sighting is seenGrain old (see workerStale).
func workerSeen(t *txn, p store.TaskClaimParams, now int64) (bool, error) {
	var (
		w     workerRow
		found = true
	)
	err := t.QueryRowContext(t.ctx, `SELECT stop_requested, kinds, address, last_seen, last_wait_ms, deregistered
		FROM workers WHERE id = ? FOR UPDATE`, p.WorkerID).Scan(&w.stop, &w.kinds, &w.address, &w.lastSeen, &w.waitMS, &w.deregistered)
	if errors.Is(err, sql.ErrNoRows) {
		found = false
	} else if err != nil {
		return false, wrap("read worker "+p.WorkerID, err)
	}
	kinds := mergeKinds(w.kinds, p.Kinds)
	if found && !w.stale(p, kinds, now) {
		return w.stop == 1, nil
	}
	_, err = t.exec(`INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms) VALUES (?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE address = VALUES(address), kinds = VALUES(kinds), last_seen = VALUES(last_seen),
			last_wait_ms = VALUES(last_wait_ms), deregistered = 0`,
		p.WorkerID, p.WorkerAddress, kinds, now, now, p.Wait.Milliseconds())
	return w.stop == 1, wrap("record worker "+p.WorkerID, err)
}

// workerRow is a worker's row as a claim reads it.
type workerRow struct {
	stop, deregistered int
	kinds, address     string
	lastSeen, waitMS   int64
}

// stale reports whether a claim by p at now must write the worker's row:
// its sighting is seenGrain old, or its address, kinds (merged: kinds),
// wait or registration changed.
func (w workerRow) stale(p store.TaskClaimParams, kinds string, now int64) bool {
	return w.lastSeen <= now-seenGrain || w.address != p.WorkerAddress || w.kinds != kinds ||
		w.waitMS != p.Wait.Milliseconds() || w.deregistered != 0
}

// mergeKinds is the kinds a worker record keeps: those it had (JSON) and
// those of its claim, sorted, or only the claim's past MaxWorkerKinds.
func mergeKinds(known string, claim []string) string {
	var had []string
	_ = json.Unmarshal([]byte(known), &had)
	all := append(slices.Clone(had), claim...)
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) > store.MaxWorkerKinds {
		all = slices.Clone(claim)
	}
	if all == nil {
		all = []string{}
	}
	b, _ := json.Marshal(all)
	return string(b)
}

// candidate is a claimable task as the claim sees it.
type candidate struct {
	store.ClaimCandidate
	workers int
	hasRun  bool // the row holds an earlier attempt's run
}

// claimKind claims up to max tasks of one kind, in weighted-round order.
// With a rate limit, it also returns, when the bucket is empty while tasks
// wait, the instant (unix ms) its next token is due; 0 otherwise.
func claimKind(t *txn, p store.TaskClaimParams, kind string, max int, now int64) ([]rota.ClaimedRun, int64, error) {
	k, err := loadKindBudget(t, kind, max, now)
	if err != nil || k == nil {
		return nil, 0, err
	}
	if k.max <= 0 {
		// Empty bucket: say when the next token is due, if anything waits.
		q, err := candidates(t, p, kind, 1, now, false)
		if err != nil || len(q[0])+len(q[1])+len(q[2]) == 0 {
			return nil, 0, err
		}
		return nil, now + store.RateWait(k.rate, k.tokens).Milliseconds(), nil
	}
	queues, err := candidates(t, p, kind, k.max, now, true)
	if err != nil {
		return nil, 0, err
	}
	picked, pos := store.WeightedPick(queues, k.factor, k.pos, k.max)
	if len(picked) == 0 {
		return nil, 0, nil
	}
	out, err := startRuns(t, p, kind, picked, now)
	if err != nil {
		return nil, 0, err
	}
	if k.rate > 0 {
		k.tokens -= float64(len(out))
	}
	if _, err := t.exec(`UPDATE kinds SET round_pos = ?, rate_tokens = ?, rate_at = ? WHERE name = ?`,
		pos, k.tokens, now, kind); err != nil {
		return nil, 0, wrap("update kind "+kind, err)
	}
	return out, 0, nil
}

// kindBudget is a kind's state as a claim sees it.
type kindBudget struct {
	factor, pos  int     // the weighted round
	rate, tokens float64 // the rate bucket, refilled to now
	max          int     // tasks the cap and the bucket let the claim take
}

// loadKindBudget locks kind's row and reads its round and rate bucket and
// how many of max tasks its MaxRunning cap and bucket allow at now (max 0:
// the bucket is empty). It returns nil for an unknown or paused kind, or
// one at its cap.
func loadKindBudget(t *txn, kind string, max int, now int64) (*kindBudget, error) {
	k := kindBudget{max: max}
	var paused, maxRunning int
	var rateAt int64
	err := t.QueryRowContext(t.ctx, `SELECT priority_factor, paused, max_running, round_pos, rate, rate_tokens, rate_at
		FROM kinds WHERE name = ? FOR UPDATE`, kind).Scan(&k.factor, &paused, &maxRunning, &k.pos, &k.rate, &k.tokens, &rateAt)
	if errors.Is(err, sql.ErrNoRows) || paused == 1 {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("load kind "+kind, err)
	}
	if maxRunning > 0 {
		var running int
		if err := t.QueryRowContext(t.ctx, `SELECT (SELECT COUNT(*) FROM tasks WHERE run_live = 1 AND kind = ?)
			+ (SELECT COUNT(*) FROM run_history WHERE run_live = 1 AND kind = ?)`, kind, kind).Scan(&running); err != nil {
			return nil, wrap("running runs of "+kind, err)
		}
		if k.max = min(k.max, maxRunning-running); k.max <= 0 {
			return nil, nil
		}
	}
	if k.rate > 0 {
		k.tokens = store.RateRefill(k.rate, k.tokens, rateAt, now)
		k.max = min(k.max, int(k.tokens))
	}
	return &k, nil
}

// pickQuery selects, in one statement, up to max claimable tasks per level
// for a worker, each level's list pinned-to-the-worker first, then oldest
// first; with lock, each part locks its rows FOR UPDATE SKIP LOCKED, so a
// task another transaction is changing is passed over, not waited for.
func pickQuery(pinnedOnly, lock bool) string {
	const notMine = ` AND (workers = 1 OR NOT EXISTS (SELECT 1 FROM run_history r WHERE r.task_id = tasks.id
		AND r.worker_id = ? AND r.status IN ('RUNNING', 'SUCCESS')))`
	const cols = `SELECT id, payload, level, attempt, timeout_s, hb_timeout_s, pinned, run_at, schedule_id, fire_time,
		workers, run_id <> '' FROM tasks`
	tail := ` ORDER BY run_at, id LIMIT ?`
	if lock {
		tail += ` FOR UPDATE SKIP LOCKED`
	}
	var parts []string
	for level := range 3 {
		lv := strconv.Itoa(level)
		parts = append(parts, `(`+cols+` WHERE kind = ? AND avail = 1 AND level = `+lv+` AND pinned = 1 AND run_at <= ?
			AND JSON_CONTAINS(worker_ids, JSON_QUOTE(?))`+notMine+tail+`)`)
		if !pinnedOnly {
			parts = append(parts, `(`+cols+` WHERE kind = ? AND avail = 1 AND level = `+lv+` AND pinned = 0 AND run_at <= ?`+notMine+tail+`)`)
		}
	}
	return strings.Join(parts, " UNION ALL ") + ` ORDER BY level, pinned DESC, run_at, id`
}

var pickQueries = [2][2]string{
	{pickQuery(false, false), pickQuery(false, true)},
	{pickQuery(true, false), pickQuery(true, true)},
}

// candidates returns up to max claimable tasks per level (high, mid, low)
// for the claiming worker: pinned to it first, then unpinned (none for a
// PinnedOnly claim), each oldest first.
func candidates(t *txn, p store.TaskClaimParams, kind string, max int, now int64, lock bool) ([3][]candidate, error) {
	var queues [3][]candidate
	var args []any
	for range 3 {
		args = append(args, kind, now, p.WorkerID, p.WorkerID, max)
		if !p.PinnedOnly {
			args = append(args, kind, now, p.WorkerID, max)
		}
	}
	rows, err := t.QueryContext(t.ctx, pickQueries[boolInt(p.PinnedOnly)][boolInt(lock)], args...)
	cands, err := collect(rows, err, "claim candidates", func(sc scanner) (candidate, error) {
		var c candidate
		var pinned int
		err := sc.Scan(&c.ID, &c.Payload, &c.Level, &c.Attempt, &c.TimeoutSeconds, &c.HeartbeatTimeoutSeconds,
			&pinned, &c.RunAt, &c.ScheduleID, &c.FireTime, &c.workers, &c.hasRun)
		return c, err
	})
	for _, c := range cands {
		// Each level lists up to max pinned and max unpinned tasks.
		if len(queues[c.Level]) < max {
			queues[c.Level] = append(queues[c.Level], c)
		}
	}
	return queues, err
}

// startRuns makes a run of each picked task (locked by the pick) for the
// claiming worker, set-based: one UPDATE of all the picked task rows (a
// one-worker task's run goes into its row, its run id chosen by a CASE on
// the task id), after one INSERT that moves the retried ones' previous
// runs to run_history and one that inserts the runs of the tasks of
// several workers, each only when there are some. The attempt, lease and
// deadline the UPDATE writes are store.ClaimCandidate.Start's, computed
// from the same row.
func startRuns(t *txn, p store.TaskClaimParams, kind string, picked []candidate, now int64) ([]rota.ClaimedRun, error) {
	out := make([]rota.ClaimedRun, 0, len(picked))
	var (
		ids, runIDs, retried []any
		multiRows            []string
		multiArgs            []any
	)
	for _, c := range picked {
		run, lease, deadline := c.Start(kind, p.NewRunID(), now)
		out = append(out, run)
		ids = append(ids, c.ID)
		switch {
		case c.workers > 1:
			multiRows = append(multiRows, `(?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?, ?, '', 1)`)
			multiArgs = append(multiArgs, run.RunID, c.ID, kind, p.WorkerID, p.WorkerAddress, run.Attempt, now, lease, deadline)
		default:
			runIDs = append(runIDs, c.ID, run.RunID)
			if c.hasRun {
				retried = append(retried, c.ID)
			}
		}
	}
	if len(retried) > 0 {
		if err := archiveRuns(t, retried); err != nil {
			return nil, err
		}
	}
	if len(multiRows) > 0 {
		if _, err := t.exec(`INSERT INTO run_history (id, task_id, kind, worker_id, worker_address, attempt, status,
			start_time, lease_expires_at, deadline, message, run_live) VALUES `+strings.Join(multiRows, ", "), multiArgs...); err != nil {
			return nil, wrap("insert runs", err)
		}
	}
	if err := claimRows(t, p, ids, runIDs, now); err != nil {
		return nil, err
	}
	return out, nil
}

// claimRows marks the picked tasks ids RUNNING in one UPDATE. runIDs
// pairs each one-worker task's id with its new run id; those tasks get
// their run in their row. MySQL applies a single-table UPDATE's
// assignments left to right: avail reads running as just incremented.
func claimRows(t *txn, p store.TaskClaimParams, ids, runIDs []any, now int64) error {
	runID := `run_id`
	if len(runIDs) > 0 {
		runID = `CASE id` + strings.Repeat(` WHEN ? THEN ?`, len(runIDs)/2) + ` ELSE run_id END`
	}
	args := append([]any{now, p.WorkerAddress, now}, runIDs...)
	args = append(args, p.WorkerID, now, now, now)
	args = append(args, ids...)
	_, err := t.exec(`UPDATE tasks SET status = 'RUNNING', attempt = attempt + 1, running = running + 1,
		avail = CASE WHEN workers = 1 THEN 0 ELSE running + successes < workers END,
		start_time = CASE WHEN start_time = 0 THEN ? ELSE start_time END, worker_address = ?, updated_at = ?,
		run_id = CASE WHEN workers = 1 THEN `+runID+` ELSE run_id END,
		run_worker = CASE WHEN workers = 1 THEN ? ELSE run_worker END,
		run_status = CASE WHEN workers = 1 THEN 'RUNNING' ELSE run_status END,
		run_start = CASE WHEN workers = 1 THEN ? ELSE run_start END,
		run_end = CASE WHEN workers = 1 THEN 0 ELSE run_end END,
		run_lease = CASE WHEN workers = 1 THEN ? + hb_timeout_s * 1000 ELSE run_lease END,
		run_deadline = CASE WHEN workers <> 1 THEN run_deadline WHEN timeout_s > 0 THEN ? + timeout_s * 1000 ELSE 0 END,
		run_stop = CASE WHEN workers = 1 THEN 0 ELSE run_stop END,
		run_message = CASE WHEN workers = 1 THEN '' ELSE run_message END,
		run_live = CASE WHEN workers = 1 THEN 1 ELSE run_live END
		WHERE id IN (`+inList(len(ids))+`)`, args...)
	return wrap("claim tasks", err)
}

// archiveRuns moves the finished runs the rows of tasks ids hold to the
// history (newer attempts are about to replace them), in one statement.
func archiveRuns(t *txn, ids []any) error {
	_, err := t.exec(`INSERT INTO run_history (id, task_id, kind, worker_id, worker_address, attempt, status, start_time,
		end_time, lease_expires_at, deadline, stop_requested, message)
		SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end, run_lease,
			run_deadline, run_stop, run_message FROM tasks WHERE id IN (`+inList(len(ids))+`) AND run_id <> ''`, ids...)
	return wrap("keep the previous runs", err)
}
