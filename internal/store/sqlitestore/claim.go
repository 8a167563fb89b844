package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/internal/store"
)

// TaskClaim implements store.Store. The dispatch rules are documented on
// store.TaskClaimParams.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	var res store.TaskClaimResult
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res = store.TaskClaimResult{}
		now := ms(p.Now)
		drain, err := workerSeen(ctx, tx, p, now)
		if err != nil {
			return err
		}
		if drain {
			res.Drain = true
			return nil
		}
		for _, kind := range p.Kinds {
			left := p.Max - len(res.Runs)
			if left <= 0 {
				break
			}
			runs, limited, err := claimKind(ctx, tx, p, kind, left, now)
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

// workerSeen records the claiming worker and reports whether it must drain.
func workerSeen(ctx context.Context, tx *wtx, p store.TaskClaimParams, now int64) (bool, error) {
	kinds, _ := json.Marshal(p.Kinds)
	var stop int
	err := tx.QueryRowContext(ctx, `INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address,
			kinds = CASE WHEN workers.kinds = excluded.kinds THEN workers.kinds ELSE
				coalesce((SELECT CASE WHEN count(*) > `+strconv.Itoa(store.MaxWorkerKinds)+` THEN NULL ELSE json_group_array(value) END
					FROM (SELECT value FROM json_each(workers.kinds)
					UNION SELECT value FROM json_each(excluded.kinds) ORDER BY 1)), excluded.kinds) END,
			last_seen = excluded.last_seen, last_wait_ms = excluded.last_wait_ms, deregistered = 0
		RETURNING stop_requested`, p.WorkerID, p.WorkerAddress, string(kinds), now, now, p.Wait.Milliseconds()).Scan(&stop)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: record worker %s: %w", p.WorkerID, err)
	}
	return stop == 1, nil
}

// candidate is a claimable task as the claim sees it.
type candidate = store.ClaimCandidate

// claimKind claims up to max tasks of one kind, in weighted-round order.
//
// With a rate limit, it also returns, when the bucket is empty while tasks
// wait, the instant (unix ms) its next token is due; 0 otherwise.
func claimKind(ctx context.Context, tx *wtx, p store.TaskClaimParams, kind string, max int, now int64) ([]rota.ClaimedRun, int64, error) {
	k, err := loadKindBudget(ctx, tx, kind, max, now)
	if err != nil || k == nil {
		return nil, 0, err
	}
	if k.max <= 0 {
		// Empty bucket: say when the next token is due, if anything waits.
		q, _, err := candidates(ctx, tx, p, kind, 1, now)
		if err != nil {
			return nil, 0, err
		}
		if len(q[0])+len(q[1])+len(q[2]) == 0 {
			return nil, 0, nil
		}
		return nil, now + store.RateWait(k.rate, k.tokens).Milliseconds(), nil
	}
	queues, multi, err := candidates(ctx, tx, p, kind, k.max, now)
	if err != nil {
		return nil, 0, err
	}
	picked, pos := store.WeightedPick(queues, k.factor, k.pos, k.max)
	if len(picked) == 0 {
		return nil, 0, nil
	}
	out, err := startRuns(ctx, tx, p, kind, picked, multi, now)
	if err != nil {
		return nil, 0, err
	}
	if k.rate > 0 {
		k.tokens -= float64(len(out))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE kinds SET round_pos = ?, rate_tokens = ?, rate_at = ? WHERE name = ?`,
		pos, k.tokens, now, kind); err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: update kind %s: %w", kind, err)
	}
	return out, 0, nil
}

// kindBudget is a kind's state as a claim sees it.
type kindBudget struct {
	factor, pos  int     // the weighted round
	rate, tokens float64 // the rate bucket, refilled to now
	max          int     // tasks the cap and the bucket let the claim take
}

// loadKindBudget reads kind's round and rate bucket and how many of max
// tasks its MaxRunning cap and bucket allow at now (max 0: the bucket is
// empty). It returns nil for an unknown or paused kind, or one at its cap.
func loadKindBudget(ctx context.Context, tx *wtx, kind string, max int, now int64) (*kindBudget, error) {
	k := kindBudget{max: max}
	var paused, maxRunning int
	var rateAt int64
	err := tx.QueryRowContext(ctx, `SELECT priority_factor, paused, max_running, round_pos, rate, rate_tokens, rate_at
		FROM kinds WHERE name = ?`, kind).Scan(&k.factor, &paused, &maxRunning, &k.pos, &k.rate, &k.tokens, &rateAt)
	if errors.Is(err, sql.ErrNoRows) || paused == 1 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: load kind %s: %w", kind, err)
	}
	if maxRunning > 0 {
		var running int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE kind = ? AND status = 'RUNNING'`, kind).Scan(&running); err != nil {
			return nil, fmt.Errorf("sqlitestore: running runs of %s: %w", kind, err)
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

// startRuns makes a run of each picked task for the claiming worker. A
// single-worker task keeps its run in its row: one UPDATE claims them all
// (a retry first moves its previous attempt, ended, to run_log: one
// INSERT for all). A multi-worker task's run is a row of run_log.
func startRuns(ctx context.Context, tx *wtx, p store.TaskClaimParams, kind string, picked []candidate, multi map[string]bool, now int64) ([]rota.ClaimedRun, error) {
	out := make([]rota.ClaimedRun, 0, len(picked))
	var inRow []byte // {task id: run id, …}: the claims kept in task rows
	retries := false
	for _, c := range picked {
		run, lease, deadline := c.Start(kind, p.NewRunID(), now)
		out = append(out, run)
		if !multi[c.ID] {
			if inRow == nil {
				inRow = make([]byte, 0, 2+len(picked)*(len(c.ID)+len(run.RunID)+6))
				inRow = append(inRow, '{')
			} else {
				inRow = append(inRow, ',')
			}
			inRow = jsonwire.AppendString(inRow, c.ID)
			inRow = append(inRow, ':')
			inRow = jsonwire.AppendString(inRow, run.RunID)
			retries = retries || c.Attempt > 0
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_log (id, task_id, kind, worker_id, worker_address, attempt, status,
			start_time, lease_expires_at, deadline, expires_at) VALUES (?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?, ?, ?)`,
			run.RunID, c.ID, kind, p.WorkerID, p.WorkerAddress, run.Attempt, now, lease, deadline, store.RunExpiresAt(lease, deadline)); err != nil {
			return nil, fmt.Errorf("sqlitestore: insert run: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'RUNNING', attempt = ?, running = running + 1,
			avail = (running + 1 + successes < workers), start_time = CASE WHEN start_time = 0 THEN ? ELSE start_time END,
			worker_address = ?, updated_at = ? WHERE id = ?`, run.Attempt, now, p.WorkerAddress, now, c.ID); err != nil {
			return nil, fmt.Errorf("sqlitestore: mark task running: %w", err)
		}
	}
	if inRow == nil {
		return out, nil
	}
	return out, claimRows(ctx, tx, p, string(append(inRow, '}')), retries, now)
}

// claimRows starts the runs of single-worker tasks in their rows: j is a
// JSON object of their task ids to their new run ids, written by
// startRuns (encoding/json sorted and reflected over a map, a tenth of
// the statement). The attempt, lease and deadline are computed as
// store.ClaimCandidate.Start does, from the row. OR FAIL: see
// noStatementJournal.
func claimRows(ctx context.Context, tx *wtx, p store.TaskClaimParams, j string, retries bool, now int64) error {
	if retries {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_log (id, task_id, kind, worker_id, worker_address, attempt, status,
			start_time, end_time, lease_expires_at, deadline, expires_at, stop_requested, message)
			SELECT run_id, id, kind, run_worker, worker_address, attempt, run_status, run_start, run_end, run_lease,
			run_deadline, 0, run_stop, run_message FROM tasks WHERE id IN (SELECT key FROM json_each(?)) AND run_id IS NOT NULL`,
			j); err != nil {
			return fmt.Errorf("sqlitestore: keep the previous runs: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE OR FAIL tasks SET status = 'RUNNING', attempt = attempt + 1, running = running + 1,
		avail = (running + 1 + successes < workers), start_time = CASE WHEN start_time = 0 THEN ?1 ELSE start_time END,
		worker_address = ?2, updated_at = ?1, run_id = j.value, run_worker = ?3, run_status = 'RUNNING', run_start = ?1,
		run_end = 0, run_lease = ?1 + hb_timeout_s * 1000, run_deadline = CASE WHEN timeout_s > 0 THEN ?1 + timeout_s * 1000 ELSE 0 END,
		run_stop = 0, run_message = '' FROM json_each(?4) AS j WHERE tasks.id = j.key`,
		now, p.WorkerAddress, p.WorkerID, j); err != nil {
		return fmt.Errorf("sqlitestore: mark tasks running: %w", err)
	}
	return nil
}

// candidateQuery selects, in one statement, up to max claimable tasks of
// each level, pinned to the worker and not: six seeks of tasks_ready, each
// read in its index order (run_at, id). One UNION ALL of six index seeks
// costs far less than six statements. It has no ORDER BY of its own:
// SQLite sorted each seek's rows in a temporary b-tree to merge them in
// (level, pinned, run_at, id) order, a record built, sorted and read back
// per candidate (3% of the writer's instructions per task in
// BenchmarkGroupCycleHeld); candidates puts the seeks in that order
// instead. Levels are literals, not parameters: SQLite re-prepares a
// statement whose parameter compared with an indexed column changes value
// between runs. The LIMIT is ?4 + 0, not ?4: SQLite reads a bare parameter
// of a LIMIT when it plans, and so re-prepared the whole statement at
// every claim (binding any value to such a parameter expires the plan) —
// a fifth of a claim's CPU.
var candidateQuery = pickQuery(false)

// pinnedCandidateQuery is candidateQuery for a PinnedOnly claim: only the
// three seeks of tasks_ready with pinned = 1, so unpinned tasks are never
// read. Same parameters.
var pinnedCandidateQuery = pickQuery(true)

// pickQuery builds candidateQuery, or pinnedCandidateQuery when pinnedOnly.
func pickQuery(pinnedOnly bool) string {
	const notMine = ` AND (workers = 1 OR NOT EXISTS (SELECT 1 FROM run_log r WHERE r.task_id = tasks.id
		AND r.worker_id = ?1 AND r.status IN ('RUNNING', 'SUCCESS')))`
	const cols = `SELECT id, payload, level, attempt, timeout_s, hb_timeout_s, pinned, run_at, schedule_id, fire_time, workers FROM tasks`
	var parts []string
	for level := range 3 {
		lv := strconv.Itoa(level)
		parts = append(parts,
			`SELECT * FROM (`+cols+` WHERE avail = 1 AND kind = ?2 AND level = `+lv+` AND pinned = 1 AND run_at <= ?3
				AND EXISTS (SELECT 1 FROM json_each(tasks.worker_ids) WHERE value = ?1)`+notMine+` ORDER BY run_at, id LIMIT ?4 + 0)`)
		if !pinnedOnly {
			parts = append(parts,
				`SELECT * FROM (`+cols+` WHERE avail = 1 AND kind = ?2 AND level = `+lv+` AND pinned = 0 AND run_at <= ?3`+notMine+` ORDER BY run_at, id LIMIT ?4 + 0)`)
		}
	}
	return strings.Join(parts, " UNION ALL ")
}

// candidates returns up to max claimable tasks per level (high, mid, low)
// for the claiming worker: pinned to it first, then unpinned (none for a
// PinnedOnly claim), each oldest first (run_at, then id); and the ids of
// those of multi-worker tasks (nil when none). The rows of each seek come
// in that order from its index; candidates checks it and sorts a seek
// whose rows came otherwise, so the pick never depends on the order
// SQLite returns the seeks or their rows in.
func candidates(ctx context.Context, tx *wtx, p store.TaskClaimParams, kind string, max int, now int64) ([3][]candidate, map[string]bool, error) {
	var queues [3][]candidate
	var seeks [6][]candidate // level*2 (pinned), level*2 + 1 (not pinned)
	var multi map[string]bool
	q := candidateQuery
	if p.PinnedOnly {
		q = pinnedCandidateQuery
	}
	rows, err := tx.QueryContext(ctx, q, p.WorkerID, kind, now, max)
	if err != nil {
		return queues, nil, fmt.Errorf("sqlitestore: claim candidates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c candidate
		var pinned, workers int
		if err := rows.Scan(&c.ID, &c.Payload, &c.Level, &c.Attempt, &c.TimeoutSeconds, &c.HeartbeatTimeoutSeconds,
			&pinned, &c.RunAt, &c.ScheduleID, &c.FireTime, &workers); err != nil {
			return queues, nil, fmt.Errorf("sqlitestore: scan candidate: %w", err)
		}
		if c.Level < 0 || c.Level > 2 {
			return queues, nil, fmt.Errorf("sqlitestore: candidate %s has level %d", c.ID, c.Level)
		}
		i := c.Level*2 + 1
		if pinned == 1 {
			i--
		}
		seeks[i] = append(seeks[i], c)
		if workers > 1 {
			if multi == nil {
				multi = map[string]bool{}
			}
			multi[c.ID] = true
		}
	}
	if err := rows.Err(); err != nil {
		return queues, nil, err
	}
	for i := range seeks {
		if !slices.IsSortedFunc(seeks[i], oldestFirst) {
			slices.SortFunc(seeks[i], oldestFirst)
		}
	}
	// Each level lists up to max tasks: its pinned ones, then the others.
	for level := range queues {
		l := seeks[level*2]
		if len(l) == 0 {
			l = seeks[level*2+1]
		} else {
			l = append(l, seeks[level*2+1]...)
		}
		queues[level] = l[:min(len(l), max)]
	}
	return queues, multi, nil
}

// oldestFirst orders candidates of one seek: by run_at, then id.
func oldestFirst(a, b candidate) int {
	return cmp.Or(cmp.Compare(a.RunAt, b.RunAt), strings.Compare(a.ID, b.ID))
}
