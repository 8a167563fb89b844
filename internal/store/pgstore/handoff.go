package pgstore

import (
	"context"
	"fmt"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Hand-off: a task submitted while a claim of its kind waits on this node
// (a worker's long-poll that found nothing) is inserted with that claim's
// run already started, in the insert's one statement. The claim's own
// statements — six in two round trips, a commit and its WAL flush, a
// second row version of the task — are not needed then: a task costs one
// row version less and its worker gets it one claim's time sooner.
//
// It is a claim like any other, so the statement checks what a claim
// would find in its way and, when something is, inserts the task waiting
// as usual (the claim then takes the usual way): the kind must be neither
// paused nor capped (max_running) nor rate-limited (those need the kind's
// lock, which a claim takes to count exactly), the worker known and not
// asked to stop, and no unpinned task of the kind claimable already (the
// weighted round and the queue's order would pick that one first; three
// probes of tasks_ready, one per level). The kind's round position is left
// as it is: the task was the only one to pick.

// TaskInsertStarted inserts p (store.Startable) and, when nothing stands
// in the way (see above), starts its first run for the claim sp names, in
// the same statement outside a transaction block: one statement, one
// commit. It returns the insert's answer (the task as submitted) and the
// run handed out, or nil when the task was inserted waiting; a task that
// is not Startable, or of a kind this node has not seen stored, is
// inserted by TaskInsertMany and handed nothing.
func (s *Store) TaskInsertStarted(ctx context.Context, p store.TaskInsertParams, sp store.StartFor) (store.TaskInsertResult, *rota.ClaimedRun, error) {
	ps := []store.TaskInsertParams{p}
	if !store.Startable(p, sp.Now) || !s.copyable(ps) {
		res, err := s.TaskInsertMany(ctx, ps)
		if err != nil {
			return store.TaskInsertResult{}, nil, err
		}
		return res[0], nil, nil
	}
	if err := ctx.Err(); err != nil {
		return store.TaskInsertResult{}, nil, s.translate("insert tasks", err)
	}
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	start := ms(sp.Now)
	c := store.ClaimCandidate{ID: p.ID, Payload: p.Payload, Level: p.Priority.Level(), TimeoutSeconds: p.TimeoutSeconds,
		HeartbeatTimeoutSeconds: p.HeartbeatTimeoutSeconds, RunAt: runAt, ScheduleID: p.ScheduleID, FireTime: ms(p.FireTime)}
	run, lease, deadline := c.Start(p.Kind, sp.RunID, start)
	// Once sent, the INSERT is waited for whatever ctx does (see
	// insertCopy).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	var started bool
	err := s.pool.QueryRow(cctx, insertStartedSQL, p.ID, p.Kind, p.Priority.Level(), nullJSON(p.Payload), p.MaxRetries,
		p.TimeoutSeconds, p.HeartbeatTimeoutSeconds, now, runAt, p.ScheduleID, ms(p.FireTime),
		sp.WorkerID, sp.WorkerAddress, sp.RunID, lease, deadline, start).Scan(&started)
	if err != nil {
		return store.TaskInsertResult{}, nil, s.translate("insert tasks", fmt.Errorf("insert a started task: %w", err))
	}
	res := store.TaskInsertResult{Task: insertedTask(p)}
	if !started {
		// Waiting as if inserted by TaskInsertMany: the other nodes hear
		// of it as they would then.
		ns := make(notes)
		ns.add(p.Kind, runAt, now, false)
		s.post(ns)
		return res, nil, nil
	}
	return res, &run, nil
}

// insertStartedSQL inserts task $1 of kind $2 (level $3, payload $4, max
// retries $5, timeouts $6 and $7, created at $8, due at $9, schedule $10
// and fire time $11) and, when ok (see the comment at the top of this
// file), RUNNING with the run $14 of worker $12 at address $13 started at
// $17, leased until $15, deadline $16; else waiting, as insertOneSQL
// inserts it. It returns whether the run started. Each probe for an
// unpinned task waiting at a level reads the head of tasks_ready: its
// order (run_at, id) leaves a generic plan no other index, where without
// it a plan made while the table was small scanned the table
// (TestHandoffProbesReadReadyIndex). g is computed once (OFFSET 0 keeps the
// planner from pulling it up): pulled up, each of the thirteen references
// to g.ok carried its own copy of the five probes, each run on its own.
const insertStartedSQL = `INSERT INTO tasks (id, kind, level, payload, status, max_retries, workers, timeout_s, hb_timeout_s,
		created_at, run_at, schedule_id, fire_time, updated_at,
		attempt, running, avail, holders, start_time, worker_address,
		run_id, run_worker, run_status, run_start, run_lease, run_deadline)
	SELECT $1::text, $2::text, $3::smallint, $4::json, CASE WHEN g.ok THEN 'RUNNING' ELSE 'SCHEDULED' END,
		$5::int, 1, $6::int, $7::int, $8::bigint, $9::bigint, $10::text, $11::bigint, $8::bigint,
		g.ok::int, g.ok::int, NOT g.ok, CASE WHEN g.ok THEN ARRAY[$12::text] ELSE '{}'::text[] END,
		CASE WHEN g.ok THEN $17::bigint ELSE 0 END, CASE WHEN g.ok THEN $13::text ELSE '' END,
		CASE WHEN g.ok THEN $14::text END, CASE WHEN g.ok THEN $12::text ELSE '' END,
		CASE WHEN g.ok THEN 'RUNNING' ELSE '' END, CASE WHEN g.ok THEN $17::bigint ELSE 0 END,
		CASE WHEN g.ok THEN $15::bigint ELSE 0 END, CASE WHEN g.ok THEN $16::bigint ELSE 0 END
	FROM (SELECT EXISTS (SELECT 1 FROM kinds WHERE name = $2 AND NOT paused AND max_running = 0 AND rate = 0)
		AND EXISTS (SELECT 1 FROM workers WHERE id = $12 AND NOT stop_requested AND NOT deregistered)
		AND NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM tasks WHERE avail AND kind = $2 AND level = 0 AND NOT pinned AND run_at <= $17
			ORDER BY run_at, id LIMIT 1) AS w)
		AND NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM tasks WHERE avail AND kind = $2 AND level = 1 AND NOT pinned AND run_at <= $17
			ORDER BY run_at, id LIMIT 1) AS w)
		AND NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM tasks WHERE avail AND kind = $2 AND level = 2 AND NOT pinned AND run_at <= $17
			ORDER BY run_at, id LIMIT 1) AS w)
		AS ok OFFSET 0) AS g
	RETURNING status = 'RUNNING'`
