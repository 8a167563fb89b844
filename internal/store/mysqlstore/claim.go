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

// workerSeen records the claiming worker (its kinds accumulate up to
// store.MaxWorkerKinds) and reports whether it must drain.
func workerSeen(t *txn, p store.TaskClaimParams, now int64) (bool, error) {
	var (
		stop  int
		known string
	)
	err := t.QueryRowContext(t.ctx, `SELECT stop_requested, kinds FROM workers WHERE id = ? FOR UPDATE`, p.WorkerID).Scan(&stop, &known)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, wrap("read worker "+p.WorkerID, err)
	}
	kinds := mergeKinds(known, p.Kinds)
	_, err = t.exec(`INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms) VALUES (?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE address = VALUES(address), kinds = VALUES(kinds), last_seen = VALUES(last_seen),
			last_wait_ms = VALUES(last_wait_ms), deregistered = 0`,
		p.WorkerID, p.WorkerAddress, kinds, now, now, p.Wait.Milliseconds())
	return stop == 1, wrap("record worker "+p.WorkerID, err)
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

// startRuns makes a run of each picked task for the claiming worker: one
// write of the task row for a one-worker task (after moving its previous
// attempt's run to the history, for a retry), a run_history row for a task
// of several workers.
func startRuns(t *txn, p store.TaskClaimParams, kind string, picked []candidate, now int64) ([]rota.ClaimedRun, error) {
	out := make([]rota.ClaimedRun, 0, len(picked))
	for _, c := range picked {
		run, lease, deadline := c.Start(kind, p.NewRunID(), now)
		if c.workers > 1 {
			if _, err := t.exec(`INSERT INTO run_history (id, task_id, kind, worker_id, worker_address, attempt, status,
				start_time, lease_expires_at, deadline, message, run_live) VALUES (?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?, ?, '', 1)`,
				run.RunID, c.ID, kind, p.WorkerID, p.WorkerAddress, run.Attempt, now, lease, deadline); err != nil {
				return nil, wrap("insert run", err)
			}
			if _, err := t.exec(`UPDATE tasks SET status = 'RUNNING', attempt = ?, running = running + 1,
				avail = (running + successes < workers), start_time = CASE WHEN start_time = 0 THEN ? ELSE start_time END,
				worker_address = ?, updated_at = ? WHERE id = ?`, run.Attempt, now, p.WorkerAddress, now, c.ID); err != nil {
				return nil, wrap("mark task running", err)
			}
			out = append(out, run)
			continue
		}
		if c.hasRun {
			if err := archiveRun(t, c.ID); err != nil {
				return nil, err
			}
		}
		if _, err := t.exec(`UPDATE tasks SET status = 'RUNNING', attempt = ?, running = running + 1, avail = 0,
			start_time = CASE WHEN start_time = 0 THEN ? ELSE start_time END, worker_address = ?, updated_at = ?,
			run_id = ?, run_worker = ?, run_status = 'RUNNING', run_start = ?, run_end = 0, run_lease = ?,
			run_deadline = ?, run_stop = 0, run_message = '', run_live = 1 WHERE id = ?`,
			run.Attempt, now, p.WorkerAddress, now, run.RunID, p.WorkerID, now, lease, deadline, c.ID); err != nil {
			return nil, wrap("claim task", err)
		}
		out = append(out, run)
	}
	return out, nil
}

// archiveRun moves the finished run a task row holds to the history (a
// newer attempt is about to replace it).
func archiveRun(t *txn, taskID string) error {
	_, err := t.exec(`INSERT INTO run_history (id, task_id, kind, worker_id, worker_address, attempt, status, start_time,
		end_time, lease_expires_at, deadline, stop_requested, message)
		SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end, run_lease,
			run_deadline, run_stop, run_message FROM tasks WHERE id = ? AND run_id <> ''`, taskID)
	return wrap("keep the previous run of "+taskID, err)
}
