package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// TaskClaim implements store.Store. The dispatch rules are documented on
// store.TaskClaimParams; the locking on the package doc. A claim of one
// kind (claimOne) is one round trip: BEGIN, the worker's record with the
// kind's lock, the pick with the start of the runs (claimOneSQL), COMMIT.
// A claim of several kinds costs two per kind it takes tasks from: the
// lock and the pick (candidatesSQL), then the runs, with COMMIT at the end.
func (s *Store) TaskClaim(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	if len(p.Kinds) == 1 && p.Max > 0 {
		return s.claimOne(ctx, p)
	}
	var res store.TaskClaimResult
	err := s.tx(ctx, "claim", func(t *txn) error {
		res = store.TaskClaimResult{}
		now := ms(p.Now)
		var stop, locked bool
		queueSeeWorker(t, p, now, &stop, &locked)
		multi := len(p.Kinds) > 1
		var held string // greatest kind whose lock this claim keeps
		for _, kind := range p.Kinds {
			left := p.Max - len(res.Runs)
			if left <= 0 {
				break
			}
			if multi {
				t.queue(`SAVEPOINT claim_kind`)
			}
			// Wait for the kind's lock only in ascending order of the locks
			// kept; otherwise skip the kind if it is busy (see package doc).
			runs, limited, err := claimKind(ctx, t, p, kind, left, now, held == "" || kind >= held, &stop, &locked)
			if err != nil {
				return err
			}
			if stop {
				// Known only now: the worker's record went with the first
				// kind's statements, which found the worker draining and
				// picked nothing.
				res.Drain = true
				return nil
			}
			res.RateLimit(limited)
			if len(runs) == 0 {
				if multi {
					// Give the kind's lock back: nothing was taken from it.
					t.queue(`ROLLBACK TO SAVEPOINT claim_kind`)
				}
				continue
			}
			held = max(held, kind)
			res.Runs = append(res.Runs, runs...)
		}
		if len(p.Kinds) == 0 || p.Max <= 0 {
			if err := t.flush(ctx); err != nil {
				return fmt.Errorf("record worker %s: %w", p.WorkerID, err)
			}
			res.Drain = stop
		}
		return nil
	})
	return res, err
}

// claimOne is TaskClaim for one kind, in one round trip: BEGIN; the
// worker's record and the kind's lock (seeWorkerAndLockSQL, both only when
// a task is claimable or the worker's row must be written, see
// queueSeeWorker); the pick and the start of the runs (claimOneSQL), which
// does nothing unless the statement before locked (this transaction has an
// id then, and only then); COMMIT. The runs' ids are made before, as many
// as the claim may take, and handed out in the order of the pick. Only a
// kind whose rate bucket held the claim back costs a second round trip
// (rateLimited, after the commit).
func (s *Store) claimOne(ctx context.Context, p store.TaskClaimParams) (store.TaskClaimResult, error) {
	kind, now := p.Kinds[0], ms(p.Now)
	var (
		res          store.TaskClaimResult
		stop, locked bool
		k            kindLock
	)
	runIDs, prefix, first := claimRunIDs(p)
	err := s.tx(ctx, "claim", func(t *txn) error {
		res = store.TaskClaimResult{}
		queueSeeWorkerAndLock(t, p, now, &stop, &locked, &k)
		t.queue(claimOneSQL[pinnedIndex(p.PinnedOnly)], kind, now, p.WorkerID, p.Max, runIDs, p.WorkerAddress, prefix, first).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var (
						c     store.ClaimCandidate
						runID string
					)
					if err := rows.Scan(&c.ID, &runID, &c.Payload, &c.Level, &c.Attempt, &c.TimeoutSeconds,
						&c.HeartbeatTimeoutSeconds, &c.RunAt, &c.ScheduleID, &c.FireTime); err != nil {
						return err
					}
					run, _, _ := c.Start(kind, runID, now)
					res.Runs = append(res.Runs, run)
				}
				return rows.Err()
			})
		return nil // the statements go with COMMIT
	})
	if err != nil {
		return store.TaskClaimResult{}, err
	}
	if stop {
		return store.TaskClaimResult{Drain: true}, nil
	}
	if len(res.Runs) == 0 && locked && k.locked && k.rate > 0 {
		if tokens := store.RateRefill(k.rate, k.tokens, k.rateAt, now); tokens < 1 {
			err := s.tx(ctx, "claim", func(t *txn) error {
				_, until, err := rateLimited(ctx, t, p, kind, now, k.rate, tokens)
				res.RateLimitedUntil = time.Time{}
				res.RateLimit(until)
				return err
			})
			if err != nil {
				return store.TaskClaimResult{}, err
			}
		}
	}
	return res, nil
}

// claimRunIDs names the runs claimOneSQL may start, the i-th going to the
// i-th task of the pick: a block of p.Max (RunIDBlock: a prefix and the
// first counter as int64, reserved, not made: a claim that finds nothing
// costs no ids) or, without RunIDBlock, p.Max ids of NewRunID (ids: then
// prefix is NULL).
func claimRunIDs(p store.TaskClaimParams) (ids []string, prefix *string, first int64) {
	if p.RunIDBlock != nil {
		pre, f := p.RunIDBlock(p.Max)
		return nil, &pre, int64(f) // the bits as they are: see NewBlock
	}
	ids = make([]string, p.Max)
	for i := range ids {
		ids[i] = p.NewRunID()
	}
	return ids, nil, 0
}

// seenGrain is how stale a worker's recorded last sighting may be: a
// claim or heartbeat within a second of the last recorded one writes
// nothing to the worker's row (unless something else of it changes), so
// that a busy worker does not cost a row version per claim. It is small
// beside store.WorkerLiveness.
const seenGrain = 1000 // ms

// queueSeeWorker queues the upsert of the claiming worker's row (its
// sighting, address, kinds, wait) and the read of its stop flag into
// *stop. The row is written only when it is new or something changes
// beyond seenGrain; a worker asked to stop is always written, so the flag
// read is the latest (RETURNING), else the statement's snapshot's.
//
// A claim that follows a wake-up (p.Woken) is likely to find work and
// skips the probes below: its upsert and lock run as they always did.
//
// A claim that finds nothing must not lock: a row lock gives the
// transaction an id, and its COMMIT then waits for a WAL flush, to learn
// that there is no work (long-poll claims find nothing often: the claim a
// worker sends when its last one came back, a wake-up another claim beat
// it to, a safety poll). So the upsert runs (and locks the worker's row,
// even when its WHERE then writes nothing, which is what orders a claim
// with a concurrent WorkerStop) only when the row must be written or a
// task of the kinds is claimable by the worker (claimableSQL); *locked
// says whether it ran. A claim whose upsert did not run hands out nothing
// (claimKind): a task that became claimable after the upsert's snapshot
// is left to the next claim, which the task's wake-up sends.
func queueSeeWorker(t *txn, p store.TaskClaimParams, now int64, stop, locked *bool) {
	t.queue(seeWorkerSQL[pinnedIndex(p.PinnedOnly)], p.WorkerID, p.WorkerAddress, idList(p.Kinds), now, p.Wait.Milliseconds(), p.Woken).
		QueryRow(func(row pgx.Row) error { return row.Scan(stop, locked) })
}

// queueSeeWorkerAndLock is queueSeeWorker for a claim of one kind, with
// that kind's lock (claimKind) in the same statement: the lock is taken
// when the worker's upsert runs (its row must be written, or a task of the
// kind is claimable), and k gets the kind's row (k.locked false when it
// was not locked, or the kind is unknown). One statement, where the two
// were two, each with its probes of tasks_ready.
func queueSeeWorkerAndLock(t *txn, p store.TaskClaimParams, now int64, stop, locked *bool, k *kindLock) {
	t.queue(seeWorkerAndLockSQL[pinnedIndex(p.PinnedOnly)], p.WorkerID, p.WorkerAddress, idList(p.Kinds), now, p.Wait.Milliseconds(),
		p.Woken, p.Kinds[0]).
		QueryRow(func(row pgx.Row) error {
			return row.Scan(stop, locked, &k.locked, &k.factor, &k.rate, &k.tokens, &k.rateAt)
		})
}

// The statements of queueSeeWorker and queueSeeWorkerAndLock, built once,
// for a claim of any task ([0]) and a PinnedOnly one ([1]): worker $1 at
// address $2 claiming kinds $3 at $4 with long-poll wait $5, woken $6
// (and the one kind $7). seeWorkerCTEs decides (g.go) and upserts (up);
// seenSQL reads the stop flag and g.go.
var (
	seeWorkerSQL = [2]string{
		seeWorkerCTEs(false) + ` SELECT ` + seenSQL,
		seeWorkerCTEs(true) + ` SELECT ` + seenSQL,
	}
	seeWorkerAndLockSQL = [2]string{seeWorkerAndLock(false), seeWorkerAndLock(true)}
)

const seenSQL = `COALESCE((SELECT stop_requested FROM up), (SELECT stop_requested FROM workers WHERE id = $1), false), (SELECT go FROM g)`

func pinnedIndex(pinnedOnly bool) int {
	if pinnedOnly {
		return 1
	}
	return 0
}

func seeWorkerCTEs(pinnedOnly bool) string {
	return `WITH g AS (
			SELECT $6::bool OR NOT EXISTS (
				SELECT 1 FROM workers w WHERE w.id = $1 AND NOT (` + workerWriteSQL + `)
			) OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS k(name) CROSS JOIN LATERAL (` + claimableSQL(pinnedOnly, "k.name", "$1", "$4") + `) AS c) AS go
		), up AS (
			` + upsertWorkerSQL + `
		)`
}

func seeWorkerAndLock(pinnedOnly bool) string {
	return seeWorkerCTEs(pinnedOnly) + `, k AS (
			SELECT priority_factor, rate, rate_tokens, rate_at FROM kinds WHERE name = $7 AND (SELECT go FROM g) FOR UPDATE
		)
		SELECT ` + seenSQL + `,
			k.priority_factor IS NOT NULL, COALESCE(k.priority_factor, 0), COALESCE(k.rate, 0), COALESCE(k.rate_tokens, 0), COALESCE(k.rate_at, 0)
		FROM (SELECT 1) AS one LEFT JOIN k ON true`
}

// upsertWorkerSQL is the worker's upsert of queueSeeWorker (parameters
// $1 to $5 as there), run only when g.go.
var upsertWorkerSQL = `INSERT INTO workers (id, address, kinds, first_seen, last_seen, last_wait_ms)
			SELECT $1, $2, $3, $4, $4, $5 FROM g WHERE g.go
			ON CONFLICT (id) DO UPDATE SET address = excluded.address,
				kinds = CASE WHEN workers.kinds = excluded.kinds THEN workers.kinds
					WHEN (SELECT count(DISTINCT k) FROM unnest(workers.kinds || excluded.kinds) AS k) > ` + strconv.Itoa(store.MaxWorkerKinds) + `
					THEN excluded.kinds ELSE
					ARRAY(SELECT DISTINCT k COLLATE "C" FROM unnest(workers.kinds || excluded.kinds) AS k ORDER BY 1) END,
				last_seen = excluded.last_seen, last_wait_ms = excluded.last_wait_ms, deregistered = false
			WHERE ` + strings.NewReplacer("w.", "workers.", "$1", "excluded.id", "$2", "excluded.address", "$3::text[]", "excluded.kinds",
	"$4::bigint", "excluded.last_seen", "$5::bigint", "excluded.last_wait_ms").Replace(workerWriteSQL) + `
			RETURNING stop_requested`

// workerWriteSQL is true of a worker row w that a claim by worker $1 at
// address $2 for kinds $3 at $4 with long-poll wait $5 must write (see
// queueSeeWorker).
var workerWriteSQL = `w.last_seen <= $4::bigint - ` + strconv.Itoa(seenGrain) + ` OR w.last_wait_ms <> $5::bigint OR w.address <> $2
	OR w.deregistered OR w.stop_requested OR NOT (w.kinds @> $3::text[])`

// claimableSQL is a query that returns a row when a task of kind (an SQL
// expression) is claimable by worker at now (SQL expressions too), as
// candidatesSQL would pick it (pause, cap and rate aside): one probe of
// tasks_ready per level and pinned-or-not, each stopping at its first row;
// only the pinned probes for a PinnedOnly claim.
func claimableSQL(pinnedOnly bool, kind, worker, now string) string {
	cols := `SELECT 1 FROM tasks t WHERE t.avail AND t.kind = ` + kind + ` AND t.run_at <= ` + now + ` AND ` + worker + ` <> ALL (t.holders)`
	var probes []string
	for level := range 3 {
		lv := strconv.Itoa(level)
		probes = append(probes, `(`+cols+` AND t.level = `+lv+` AND t.pinned AND `+worker+` = ANY (t.worker_ids) ORDER BY t.run_at, t.id LIMIT 1)`)
		if !pinnedOnly {
			probes = append(probes, `(`+cols+` AND t.level = `+lv+` AND NOT t.pinned ORDER BY t.run_at, t.id LIMIT 1)`)
		}
	}
	return strings.Join(probes, " UNION ALL ")
}

// candidate is a task a claim picked and locked.
type candidate struct {
	slot int64 // in the weighted round (round_slot)
	// logs: its claim writes run_log (a multi-worker task's run, or the
	// run its row holds, which the new one replaces).
	logs bool
	store.ClaimCandidate
}

// claimKind claims up to max tasks of one kind for a worker, in
// weighted-round order, taking the kind's row lock (waiting for it, or
// skipping a busy kind when wait is false). It sends the lock and the pick
// together; the statement that makes the runs stays queued (it goes with
// the next flush, at the latest with COMMIT). When the kind's rate bucket
// is empty while tasks wait, it returns nothing and the instant (unix ms)
// the next token is due. *drain is the worker's stop flag, whose read may
// be queued before: once set, nothing more is done; likewise when *seen,
// read with it, says the worker's row was left unlocked.
func claimKind(ctx context.Context, t *txn, p store.TaskClaimParams, kind string, max int, now int64, wait bool, drain, seen *bool) ([]rota.ClaimedRun, int64, error) {
	k, picked, err := lockAndPick(ctx, t, p, kind, max, now, wait, drain)
	if err != nil || !k.locked || *drain || !*seen {
		// (!*seen: the worker's row was not locked, see queueSeeWorker.)
		return nil, 0, err
	}
	if len(picked) == 0 {
		if k.rate > 0 {
			if tokens := store.RateRefill(k.rate, k.tokens, k.rateAt, now); tokens < 1 {
				return rateLimited(ctx, t, p, kind, now, k.rate, tokens)
			}
		}
		return nil, 0, nil
	}
	return startRuns(t, p, kind, picked, now, k.factor), 0, nil
}

// kindLock is a kind's row as a claim locked it.
type kindLock struct {
	locked       bool // false: unknown kind, or busy and not waited for
	factor       int
	rate, tokens float64
	rateAt       int64
}

// claimableLockSQL locks kind $1's row when a task of it is claimable by
// worker $3 at $2 (claimableSQL); claimableLockPinnedSQL when one pinned
// to the worker is.
var (
	claimableLockSQL       = claimableLock(false)
	claimableLockPinnedSQL = claimableLock(true)
)

func claimableLock(pinnedOnly bool) string {
	return `SELECT priority_factor, rate, rate_tokens, rate_at FROM kinds WHERE name = $1
		AND ($4::bool OR EXISTS (` + claimableSQL(pinnedOnly, "$1", "$3::text", "$2::bigint") + `)) FOR UPDATE`
}

// lockAndPick takes kind's row lock (see claimKind) and picks up to max of
// its tasks for the worker, locking them. The pick runs only once the lock
// is granted; nothing is picked for a draining worker (*drain, read by the
// first flush).
func lockAndPick(ctx context.Context, t *txn, p store.TaskClaimParams, kind string, max int, now int64, wait bool, drain *bool) (kindLock, []candidate, error) {
	// Locked only when a task is claimable (see queueSeeWorker): a claim
	// that finds nothing takes no lock.
	lock := claimableLockSQL
	if p.PinnedOnly {
		lock = claimableLockPinnedSQL
	}
	if !wait {
		lock += ` SKIP LOCKED`
	}
	var k kindLock
	t.queue(lock, kind, now, p.WorkerID, p.Woken).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&k.factor, &k.rate, &k.tokens, &k.rateAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // unknown kind, or busy
		}
		k.locked = err == nil
		return err
	})
	if !wait {
		// The pick must not run unless the lock was granted.
		if err := t.flush(ctx); err != nil {
			return k, nil, fmt.Errorf("lock kind %s: %w", kind, err)
		}
		if !k.locked || *drain {
			return k, nil, nil
		}
	}
	picked, err := pick(ctx, t, p, kind, max, now)
	return k, picked, err
}

// pick queues the pick of up to max tasks of kind (candidatesSQL) after
// the statements queued, flushes, and returns the tasks picked (locked).
func pick(ctx context.Context, t *txn, p store.TaskClaimParams, kind string, max int, now int64) ([]candidate, error) {
	q := candidatesSQL
	if p.PinnedOnly {
		q = pinnedCandidatesSQL
	}
	var picked []candidate
	t.queue(q, kind, now, p.WorkerID, max).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.slot, &c.ID, &c.Payload, &c.Level, &c.Attempt, &c.TimeoutSeconds,
				&c.HeartbeatTimeoutSeconds, &c.RunAt, &c.ScheduleID, &c.FireTime, &c.logs); err != nil {
				return err
			}
			picked = append(picked, c)
		}
		return rows.Err()
	})
	if err := t.flush(ctx); err != nil {
		return nil, fmt.Errorf("claim %s: %w", kind, err)
	}
	return picked, nil
}

// startRuns queues the runs of the picked tasks (locked) for the claiming
// worker and the kind's new round position (factor f), and returns them.
func startRuns(t *txn, p store.TaskClaimParams, kind string, picked []candidate, now int64, f int) []rota.ClaimedRun {
	n := len(picked)
	var (
		taskIDs   = make([]string, n)
		runIDs    = make([]string, n)
		attempts  = make([]int32, n)
		leases    = make([]int64, n)
		deadlines = make([]int64, n)
		out       = make([]rota.ClaimedRun, n)
	)
	for i, c := range picked {
		out[i], leases[i], deadlines[i] = c.Start(kind, p.NewRunID(), now)
		taskIDs[i], runIDs[i], attempts[i] = c.ID, out[i].RunID, int32(out[i].Attempt)
	}
	// One statement: the tasks go RUNNING (the worker joins their
	// holders), the round position moves on to the slot after the last
	// task handed out. A single-worker task keeps its run in its row; the
	// run it replaces (a retry's previous attempt, as the statement's
	// snapshot sees it) goes to the history, run_log. A multi-worker
	// task's run is inserted into run_log.
	sql := startRunsLeanSQL
	for _, c := range picked {
		if c.logs {
			sql = startRunsSQL
			break
		}
	}
	t.queue(sql,
		taskIDs, runIDs, attempts, leases, deadlines, now, p.WorkerAddress, kind, p.WorkerID,
		nextRoundPos(f, picked[n-1].slot), n)
	return out
}

// startRunsSQL starts the runs of the picked tasks ($1..$5: task ids,
// run ids, attempts, leases, deadlines) at $6 for worker $9 at address $7
// and moves kind $8's round position to $10, taking $11 tokens of its rate
// bucket (see startRuns). The task rows it reads are found by primary key
// (LIMIT 1 keeps each lookup a lookup: joined, a plan could scan tasks_run
// for the tasks that have a run, which grow with the history).
const startRunsSQL = `WITH p AS (
			` + startRunsParams + `
		), upd AS (
			` + startRunsUpdate + `
		), k AS (
			` + startRunsRound + `
		)
		INSERT INTO run_log (id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
			lease_expires_at, deadline, expires_at, stop_requested, message)
		SELECT t.run_id, t.id, t.kind, t.run_worker, t.worker_address, t.attempt, t.run_status, t.run_start, t.run_end,
			t.run_lease, t.run_deadline, 0, t.run_stop, t.run_message
		FROM p CROSS JOIN LATERAL (SELECT * FROM tasks WHERE id = p.task_id LIMIT 1) AS t
		WHERE t.workers = 1 AND t.run_id IS NOT NULL
		UNION ALL
		SELECT p.run_id, p.task_id, $8, $9, $7, p.attempt, 'RUNNING', $6, 0, p.lease, p.deadline,
			CASE WHEN p.deadline <> 0 AND p.deadline < p.lease THEN p.deadline ELSE p.lease END, false, ''
		FROM p CROSS JOIN LATERAL (SELECT workers FROM tasks WHERE id = p.task_id LIMIT 1) AS t
		WHERE t.workers <> 1`

// startRunsLeanSQL is startRunsSQL when no picked task writes run_log
// (the common case: single-worker tasks on their first attempt): the
// same parameters and effect without the insert's two primary-key
// lookups per task, which find nothing to write then.
const startRunsLeanSQL = `WITH p AS (
			` + startRunsParams + `
		), k AS (
			` + startRunsRound + `
		)
		` + startRunsUpdate

// The parts of startRunsSQL and startRunsLeanSQL: the parameters as rows,
// the tasks' update, the kind's new round position and rate bucket.
const (
	startRunsParams = `SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[])
				AS p(task_id, run_id, attempt, lease, deadline)`
	startRunsUpdate = `UPDATE tasks SET status = 'RUNNING', attempt = p.attempt, running = running + 1,
				avail = running + 1 + successes < workers, holders = array_append(holders, $9),
				start_time = CASE WHEN start_time = 0 THEN $6 ELSE start_time END,
				worker_address = $7, updated_at = $6,
				run_id = CASE WHEN workers = 1 THEN p.run_id ELSE tasks.run_id END,
				run_worker = CASE WHEN workers = 1 THEN $9 ELSE run_worker END,
				run_status = CASE WHEN workers = 1 THEN 'RUNNING' ELSE run_status END,
				run_start = CASE WHEN workers = 1 THEN $6 ELSE run_start END,
				run_end = CASE WHEN workers = 1 THEN 0 ELSE run_end END,
				run_lease = CASE WHEN workers = 1 THEN p.lease ELSE run_lease END,
				run_deadline = CASE WHEN workers = 1 THEN p.deadline ELSE run_deadline END,
				run_stop = CASE WHEN workers = 1 THEN false ELSE run_stop END,
				run_message = CASE WHEN workers = 1 THEN '' ELSE run_message END
			FROM p WHERE tasks.id = p.task_id`
	startRunsRound = `UPDATE kinds SET round_pos = $10, rate_at = $6,
				rate_tokens = CASE WHEN rate > 0 THEN rate_refill(rate, rate_tokens, rate_at, $6) - $11 ELSE rate_tokens END
			WHERE name = $8`
)

// rateLimited is claimKind's answer when the kind's rate bucket holds less
// than a token: the instant the next one is due if the worker could claim
// a task now (and the kind is neither paused nor at its MaxRunning cap),
// else 0; for a PinnedOnly claim only the tasks pinned to the worker count.
// It reads, so it costs a round trip, but only on this path.
func rateLimited(ctx context.Context, t *txn, p store.TaskClaimParams, kind string, now int64, rate, tokens float64) ([]rota.ClaimedRun, int64, error) {
	mine := `(NOT pinned OR $3 = ANY (worker_ids))`
	if p.PinnedOnly {
		mine = `pinned AND $3 = ANY (worker_ids)`
	}
	var waiting bool
	err := t.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&waiting) }, `SELECT EXISTS (
			SELECT 1 FROM kinds WHERE name = $1 AND NOT paused AND (max_running = 0
				OR max_running > (SELECT count(*) FROM runs WHERE kind = $1 AND status = 'RUNNING'))
		) AND EXISTS (
			SELECT 1 FROM tasks WHERE avail AND kind = $1 AND run_at <= $2 AND $3 <> ALL (holders)
				AND `+mine+`
		)`, kind, now, p.WorkerID)
	if err != nil || !waiting {
		return nil, 0, err
	}
	return nil, now + store.RateWait(rate, tokens).Milliseconds(), nil
}

// The weighted round, restated for SQL. store.WeightedPick walks
// the slots of the round from the kind's position: f² high slots, f mid
// slots, 1 low slot, over and over; at each slot it hands out the next task
// of the slot's level, or skips the slot when the level has no more. So the
// i-th task of a level goes out at the i-th slot of that level from the
// position on, whatever the other levels hold, and a claim of n tasks takes
// the n available tasks with the smallest such slots. The SQL function
// round_slot (migrations) computes those slots, candidatesSQL ranks each
// level's candidates, gives each its slot and keeps the n first, so one
// statement makes the whole pick and locks only the tasks it hands out.
// The tests check round_slot against a Go transcription, and that against
// store.WeightedPick itself.

// nextRoundPos is the round position after a claim whose last task went
// out at slot (counted from the start of the round of the old position).
func nextRoundPos(f int, slot int64) int {
	return int((slot + 1) % int64(store.RoundLen(f)))
}

// candidatesSQL picks, locks and returns (slot first) up to $4 tasks of
// kind $1 that worker $3 may claim at $2, in weighted-round order. It
// must run after the kind's lock is granted (the statement after it in
// the same pipeline will do): it reads the kind's position, pause and cap
// then.
//
// Nothing is picked for a draining worker, a paused kind, one at its
// MaxRunning cap or one with less than a token in its rate bucket; the cap
// is counted exactly (every claim of the kind holds the kind's lock, and
// ended runs only lower the count), the bucket refilled by rate_refill. Within a
// level the order is: tasks pinned to the worker, then unpinned ones, each
// by run_at then id; a worker that holds a run of a task (RUNNING or
// SUCCESS: the task's holders) may not take it again, which matters for
// multi-worker tasks. Each of the six (level, pinned) branches is a range
// scan of tasks_ready (kind, level and pinned are equalities, run_at <= now
// a bound, so delayed tasks are never read) that stops after $4 rows. Only
// the tasks picked are locked (FOR NO KEY UPDATE SKIP LOCKED, their
// conditions checked again on the latest row version): a task that a
// report or a stop holds is left out of this claim rather than waited for.
// That last step looks each picked task up by its id alone, in a lateral
// subquery, and tests the conditions in its select list (ok), not in its
// WHERE; its LIMIT keeps the planner from pushing the outer WHERE t.ok
// down into it: no other index can serve it, whatever the statistics say. Written
// as a join with the conditions in WHERE, a generic plan made while the
// table's statistics were stale (a young or fast-growing table) joined
// through tasks_ready (its predicate, avail, was among the conditions and
// run_at <= now an index condition), scanning the kind's whole ready
// range once per picked task: a claim of 100 read 100 × the queue's depth
// of index entries (EXPLAIN: loops=100, "Rows Removed by Join Filter:
// 4950" with 100 tasks waiting). A picked row that no longer qualifies is
// locked but not handed out; the claim's commit releases it.
var candidatesSQL = pickSQL(false)

// pinnedCandidatesSQL is candidatesSQL for a PinnedOnly claim: only the
// three pinned branches (range scans of tasks_ready with pinned = true), so
// an unpinned task is never read, let alone picked; the round, pause, cap
// and rate bucket apply as in candidatesSQL. Same parameters.
var pinnedCandidatesSQL = pickSQL(true)

// pickSQL builds candidatesSQL, or pinnedCandidatesSQL when pinnedOnly.
func pickSQL(pinnedOnly bool) string {
	return `WITH ` + pickCTEs(pinnedOnly, false) + `
		SELECT p.slot, t.id, t.payload, t.level, t.attempt, t.timeout_s, t.hb_timeout_s, t.run_at, t.schedule_id, t.fire_time,
			t.workers <> 1 OR t.run_id IS NOT NULL AS logs
		FROM picked p CROSS JOIN LATERAL (` + pickLock(pinnedOnly) + `) AS t
		WHERE t.ok
		ORDER BY p.slot`
}

// pickCTEs are the CTEs k (the kind's row: factor, position, how many may
// go out), ranked and picked (the tasks' ids and slots) of candidatesSQL
// and claimOneSQL. When gated, k is empty unless this transaction has an
// id: a claim whose first statement locked nothing picks nothing.
func pickCTEs(pinnedOnly, gated bool) string {
	const cols = `id, level, run_at FROM tasks WHERE avail AND kind = $1 AND run_at <= $2 AND $3 <> ALL (holders)`
	var branches []string
	for level := range 3 {
		lv := strconv.Itoa(level)
		branches = append(branches,
			`(SELECT 0 AS grp, `+cols+` AND level = `+lv+` AND pinned AND $3 = ANY (worker_ids) ORDER BY run_at, id LIMIT $4)`)
		if !pinnedOnly {
			branches = append(branches,
				`(SELECT 1 AS grp, `+cols+` AND level = `+lv+` AND NOT pinned ORDER BY run_at, id LIMIT $4)`)
		}
	}
	gate := ""
	if gated {
		gate = ` AND pg_current_xact_id_if_assigned() IS NOT NULL`
	}
	return `k AS (
			SELECT priority_factor AS f, round_pos AS pos,
				GREATEST(0, LEAST($4,
					CASE WHEN max_running > 0
						THEN max_running - (SELECT count(*) FROM runs WHERE kind = $1 AND status = 'RUNNING') END,
					CASE WHEN rate > 0 THEN floor(rate_refill(rate, rate_tokens, rate_at, $2))::bigint END)) AS n
			FROM kinds WHERE name = $1 AND NOT paused` + gate + `
				AND NOT EXISTS (SELECT 1 FROM workers WHERE id = $3 AND stop_requested)
		), ranked AS (
			SELECT id, level, row_number() OVER (PARTITION BY level ORDER BY grp, run_at, id) - 1 AS i
			FROM (` + strings.Join(branches, "\n\t\t\tUNION ALL ") + `) AS c
		), ` + roundLevelsSQL + `, picked AS (
			SELECT r.id, ` + slotSQL + ` AS slot
			FROM ranked r JOIN lv ON lv.level = r.level CROSS JOIN k WHERE r.i < k.n
			ORDER BY slot LIMIT (SELECT n FROM k)
		)`
}

// roundLevelsSQL is the CTE lv: for each level of the weighted round of
// factor k.f from position k.pos (k is a CTE with those columns), what
// slotSQL needs to give the level's i-th task its slot, as the SQL
// function round_slot (migrations) does: the level's first slot in a
// round (fst), its slots per round (per), the round's length (rnd), the
// slot its first task gets (frm) and how many of its slots are left in
// pos's round (lft). Made once per claim, where round_slot, a PL/pgSQL
// function, computed them for every task ranked (~3 µs of PostgreSQL CPU
// a call).
const roundLevelsSQL = `lv AS (
			SELECT v.level, v.fst, v.per, g.rnd, GREATEST(q.p, v.fst) AS frm,
				GREATEST(0, v.fst + v.per - GREATEST(q.p, v.fst)) AS lft
			FROM k CROSS JOIN LATERAL (SELECT GREATEST(k.f, 1) AS ff) AS f
				CROSS JOIN LATERAL (SELECT f.ff * f.ff + f.ff + 1 AS rnd) AS g
				CROSS JOIN LATERAL (SELECT CASE WHEN k.pos < 0 OR k.pos >= g.rnd THEN 0 ELSE k.pos END AS p) AS q
				CROSS JOIN LATERAL (VALUES (0, 0, f.ff * f.ff), (1, f.ff * f.ff, f.ff), (2, f.ff * f.ff + f.ff, 1)) AS v(level, fst, per)
		)`

// slotSQL is the slot in the weighted round of the r.i-th (0-based) task
// of level lv.level (roundLevelsSQL).
const slotSQL = `CASE WHEN r.i < lv.lft THEN lv.frm + r.i
				ELSE lv.rnd::bigint * (1 + (r.i - lv.lft) / lv.per) + lv.fst + (r.i - lv.lft) % lv.per END`

// pickLock is the lateral lookup that locks a picked task p.id (see
// candidatesSQL) and says in ok whether it may still go out; it returns
// what the claim's answer and its run_log rows need.
func pickLock(pinnedOnly bool) string {
	mine := `(NOT t.pinned OR $3 = ANY (t.worker_ids))`
	if pinnedOnly {
		mine = `t.pinned AND $3 = ANY (t.worker_ids)`
	}
	return `SELECT t.id, t.payload, t.level, t.attempt, t.timeout_s, t.hb_timeout_s, t.run_at, t.schedule_id, t.fire_time,
				t.workers, t.worker_address, t.run_id, t.run_worker, t.run_status, t.run_start, t.run_end, t.run_lease,
				t.run_deadline, t.run_stop, t.run_message,
				t.avail AND t.run_at <= $2 AND $3 <> ALL (t.holders) AND ` + mine + ` AS ok
			FROM tasks t WHERE t.id = p.id
			LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`
}

// claimOneSQL (for a claim of any task, [0], and a PinnedOnly one, [1])
// picks up to $4 tasks of kind $1 for worker $3 at address $6 at $2 as
// candidatesSQL does, and starts their runs as startRunsSQL does, in one
// statement (claimOne): the i-th task in the order of the pick gets the
// i-th run id of $5, or when $7 is not NULL the i-th of the block $7, $8
// (claimRunIDs). It runs after the statement that locked the kind (the
// next statement of the same transaction sees what that lock waited for)
// and picks nothing when that statement locked nothing (pickCTEs' gate).
// It returns the tasks started, in the order of the pick: id, run id,
// payload, level, attempt before the run, timeout, heartbeat timeout,
// run_at, schedule id, fire time.
var claimOneSQL = [2]string{claimOne(false), claimOne(true)}

func claimOne(pinnedOnly bool) string {
	return `WITH ` + pickCTEs(pinnedOnly, true) + `, c AS MATERIALIZED (
			SELECT n.*,
				CASE WHEN $7::text IS NULL THEN ($5::text[])[n.ord]
					ELSE $7::text || lpad(to_hex($8::bigint + n.ord - 1), 16, '0') END AS rid,
				$2::bigint + n.hb_timeout_s::bigint * 1000 AS lease,
				CASE WHEN n.timeout_s > 0 THEN $2::bigint + n.timeout_s::bigint * 1000 ELSE 0 END AS deadline
			FROM (
				SELECT p.slot, t.*, row_number() OVER (ORDER BY p.slot) AS ord
				FROM picked p CROSS JOIN LATERAL (` + pickLock(pinnedOnly) + `) AS t
				WHERE t.ok
			) AS n
		), upd AS (
			UPDATE tasks SET status = 'RUNNING', attempt = c.attempt + 1, running = tasks.running + 1,
				avail = tasks.running + 1 + tasks.successes < tasks.workers, holders = array_append(tasks.holders, $3),
				start_time = CASE WHEN tasks.start_time = 0 THEN $2 ELSE tasks.start_time END,
				worker_address = $6, updated_at = $2,
				run_id = CASE WHEN tasks.workers = 1 THEN c.rid ELSE tasks.run_id END,
				run_worker = CASE WHEN tasks.workers = 1 THEN $3 ELSE tasks.run_worker END,
				run_status = CASE WHEN tasks.workers = 1 THEN 'RUNNING' ELSE tasks.run_status END,
				run_start = CASE WHEN tasks.workers = 1 THEN $2 ELSE tasks.run_start END,
				run_end = CASE WHEN tasks.workers = 1 THEN 0 ELSE tasks.run_end END,
				run_lease = CASE WHEN tasks.workers = 1 THEN c.lease ELSE tasks.run_lease END,
				run_deadline = CASE WHEN tasks.workers = 1 THEN c.deadline ELSE tasks.run_deadline END,
				run_stop = CASE WHEN tasks.workers = 1 THEN false ELSE tasks.run_stop END,
				run_message = CASE WHEN tasks.workers = 1 THEN '' ELSE tasks.run_message END
			FROM c WHERE tasks.id = c.id
		), lg AS (
			INSERT INTO run_log (id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
				lease_expires_at, deadline, expires_at, stop_requested, message)
			SELECT c.run_id, c.id, $1, c.run_worker, c.worker_address, c.attempt, c.run_status, c.run_start, c.run_end,
				c.run_lease, c.run_deadline, 0, c.run_stop, c.run_message
			FROM c WHERE c.workers = 1 AND c.run_id IS NOT NULL
			UNION ALL
			SELECT c.rid, c.id, $1, $3, $6, c.attempt + 1, 'RUNNING', $2, 0, c.lease, c.deadline,
				CASE WHEN c.deadline <> 0 AND c.deadline < c.lease THEN c.deadline ELSE c.lease END, false, ''
			FROM c WHERE c.workers <> 1
		), kr AS (
			UPDATE kinds SET round_pos = (((SELECT max(slot) FROM c) + 1)
					% (GREATEST(priority_factor, 1) * GREATEST(priority_factor, 1) + GREATEST(priority_factor, 1) + 1))::int,
				rate_at = $2,
				rate_tokens = CASE WHEN rate > 0 THEN rate_refill(rate, rate_tokens, rate_at, $2) - (SELECT count(*) FROM c)
					ELSE rate_tokens END
			WHERE name = $1 AND EXISTS (SELECT 1 FROM c)
		)
		SELECT c.id, c.rid, c.payload, c.level, c.attempt, c.timeout_s, c.hb_timeout_s, c.run_at, c.schedule_id, c.fire_time
		FROM c ORDER BY c.slot`
}
