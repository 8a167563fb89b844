package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Schedules (store.ScheduleStore), the rules of sqlitestore's schedules.go
// on PostgreSQL.
//
// Locking, in the order of the package doc:
//   - configuration changes (insert, update, delete) first take the
//     store-wide revision row (schedule_rev), so that revisions commit in
//     the order they were taken (see migrations/0002_schedules.sql), then
//     the schedule's row;
//   - fires and triggers lock schedule rows (FOR NO KEY UPDATE; a batch
//     in id order, in one statement), never the revision row;
//   - then the runs (task rows) of the locked schedules: new runs are
//     inserted, held runs released or canceled. Runs of a schedule are
//     inserted and released only under its lock; task-first transactions
//     (reports, stops) never lock a schedule.
//
// A held run is stored with avail = false: the claim (candidatesSQL, an
// index range of tasks_ready WHERE avail), TaskNextRunAt and Stats'
// oldest waiting task never see it; releasing it sets avail.

var _ store.ScheduleStore = (*Store)(nil)

const scheduleCols = store.ScheduleColumns

// scanSchedule reads the scheduleCols of a row, plus extra destinations
// after them.
func scanSchedule(row pgx.Row, extra ...any) (*rota.Schedule, error) {
	var r store.ScheduleRow
	if err := row.Scan(append(r.Dest(), extra...)...); err != nil {
		return nil, err
	}
	return r.Schedule()
}

// scheduleArgs returns the configuration columns of s ($1..$16 of
// insertScheduleSQL and updateScheduleSQL) then its state columns
// ($17..$27).
func scheduleArgs(s *rota.Schedule) ([]any, error) {
	plan, target, err := store.ScheduleJSONValues(s)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	st := &s.ScheduleState
	return []any{s.Name, s.Kind, s.Priority.Level(), nullJSON(s.Payload), s.CronExpr, s.Timezone, plan,
		s.Enabled, s.MaxConcurrency, string(s.ConcurrencyPolicy), string(s.OverlapAction),
		string(s.FailureAction), string(s.MisfirePolicy), s.CatchupLimit, s.TimeoutSeconds, target,
		ms(st.HighWater), ms(st.NextFire), st.LastRunID, st.PlanSeq, ms(st.PlanAt), st.PlanRunID,
		st.PlanRetry, st.RealRepet, st.Ended, ms(st.EndedAt), st.MisfireDropped}, nil
}

// takeRev queues the move of the store-wide revision to its next value,
// locking its row until the transaction ends. Configuration changes call
// it first (the lock order above); their writes read the new value with
// revSQL.
func takeRev(t *txn) {
	t.queue(`UPDATE schedule_rev SET rev = rev + 1 WHERE id = 1`)
}

const revSQL = `(SELECT rev FROM schedule_rev WHERE id = 1)`

// nameTaken queues the check that an undeleted schedule other than id is
// named name into *taken. Under the revision lock the answer holds until
// commit: every rename and insert takes that lock.
func nameTaken(t *txn, name, id string, taken *bool) {
	t.queue(`SELECT EXISTS (SELECT 1 FROM schedules WHERE name = $1 AND NOT deleted AND id <> $2)`, name, id).
		QueryRow(func(row pgx.Row) error { return row.Scan(taken) })
}

// ScheduleInsert implements store.ScheduleStore.
func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	sc := p.Schedule
	args, err := scheduleArgs(&sc)
	if err != nil {
		return nil, err
	}
	args = append(args, sc.ID, ms(p.Now), store.ScheduleOptionsValue(&sc), store.ScheduleExtStateValue(&sc.ScheduleState), sc.ErrorMessage)
	var out *rota.Schedule
	err = s.tx(ctx, "insert schedule", func(t *txn) error {
		out = nil
		takeRev(t)
		var taken bool
		nameTaken(t, sc.Name, sc.ID, &taken)
		if err := t.flush(ctx); err != nil {
			return fmt.Errorf("check schedule name: %w", err)
		}
		if taken {
			return conflict("a schedule named %q already exists", sc.Name)
		}
		t.queue(`INSERT INTO schedules (name, kind, level, payload, cron_expr, timezone, plan, enabled,
				max_concurrency, concurrency_policy, overlap_action, failure_action, misfire_policy, catchup_limit,
				timeout_s, target, high_water, next_fire, last_run_id, plan_seq, plan_at, plan_run_id, plan_retry,
				real_repet, ended, ended_at, misfire_dropped, id, created_at, updated_at, version, rev,
				options, ext_state, error_message)
			VALUES ($1, $2, $3, $4::json, $5, $6, $7::json, $8, $9, $10, $11, $12, $13, $14, $15, $16::json,
				$17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $29, 1, `+revSQL+`, $30, $31, $32)
			RETURNING `+scheduleCols, args...).
			QueryRow(func(row pgx.Row) (err error) {
				out, err = scanSchedule(row)
				return err
			})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE id = $1 AND NOT deleted`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("schedule", id)
	}
	if err != nil {
		return nil, s.translate("get schedule "+id, err)
	}
	return sc, nil
}

// ScheduleGetByName implements store.ScheduleStore.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE name = $1 AND NOT deleted`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	if err != nil {
		return nil, s.translate(fmt.Sprintf("get schedule %q", name), err)
	}
	return sc, nil
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	q, args, limit := store.ScheduleListQuery(p, func(n int) string { return "$" + strconv.Itoa(n) })
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.ScheduleListResult{}, s.translate("list schedules", err)
	}
	scheds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Schedule, error) {
		sc, err := scanSchedule(row)
		if err != nil {
			return rota.Schedule{}, err
		}
		return *sc, nil
	})
	if err != nil {
		return store.ScheduleListResult{}, s.translate("list schedules", err)
	}
	return store.ScheduleListPage(scheds, limit), nil
}

// ScheduleUpdate implements store.ScheduleStore.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleUpdateParams) (*rota.Schedule, error) {
	sc := p.Schedule
	args, err := scheduleArgs(&sc)
	if err != nil {
		return nil, err
	}
	args = append(args, sc.ID, ms(p.Now), store.ScheduleOptionsValue(&sc), store.ScheduleExtStateValue(&sc.ScheduleState), sc.ErrorMessage)
	var out *rota.Schedule
	err = s.tx(ctx, "update schedule", func(t *txn) error {
		out = nil
		takeRev(t)
		var version int64
		found := false
		t.queue(`SELECT version FROM schedules WHERE id = $1 AND NOT deleted FOR NO KEY UPDATE`, sc.ID).
			QueryRow(func(row pgx.Row) error {
				err := row.Scan(&version)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				found = err == nil
				return err
			})
		var taken bool
		nameTaken(t, sc.Name, sc.ID, &taken)
		if err := t.flush(ctx); err != nil {
			return fmt.Errorf("read schedule %s: %w", sc.ID, err)
		}
		switch {
		case !found:
			return notFound("schedule", sc.ID)
		case version != sc.Version:
			return conflict("schedule %s changed meanwhile (version %d, not %d): read it again", sc.ID, version, sc.Version)
		case taken:
			return conflict("a schedule named %q already exists", sc.Name)
		}
		t.queue(`UPDATE schedules SET name = $1, kind = $2, level = $3, payload = $4::json, cron_expr = $5,
				timezone = $6, plan = $7::json, enabled = $8, max_concurrency = $9, concurrency_policy = $10,
				overlap_action = $11, failure_action = $12, misfire_policy = $13, catchup_limit = $14,
				timeout_s = $15, target = $16::json, high_water = $17, next_fire = $18, last_run_id = $19,
				plan_seq = $20, plan_at = $21, plan_run_id = $22, plan_retry = $23, real_repet = $24, ended = $25,
				ended_at = $26, misfire_dropped = $27, updated_at = $29, options = $30, ext_state = $31,
				error_message = $32, version = version + 1, rev = `+revSQL+`
			WHERE id = $28
			RETURNING `+scheduleCols, args...).
			QueryRow(func(row pgx.Row) (err error) {
				out, err = scanSchedule(row)
				return err
			})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleDelete implements store.ScheduleStore. The schedule row stays,
// marked deleted, so that ScheduleLoad reports it and its runs keep their
// schedule.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return s.tx(ctx, "delete schedule", func(t *txn) error {
		now := ms(p.Now)
		takeRev(t)
		var deleted bool
		t.queue(`UPDATE schedules SET deleted = true, enabled = false, next_fire = 0, version = version + 1,
				rev = `+revSQL+`, updated_at = $1
			WHERE id = $2 AND NOT deleted`, now, p.ID).
			Exec(func(ct pgconn.CommandTag) error {
				deleted = ct.RowsAffected() == 1
				return nil
			})
		// The schedule's row is locked by now: no run of it is inserted or
		// released meanwhile.
		t.queue(`UPDATE tasks SET status = 'CANCELED', avail = false, held = false, end_time = $1,
				message = 'canceled: the schedule was deleted before the run was released', updated_at = $1
			WHERE schedule_id = $2 AND schedule_id <> '' AND held AND NOT done`, now, p.ID)
		// Runs of a target schedule that never started: only Rota's HTTP
		// executor may run them, and it runs the kinds of live target
		// schedules only, so they would wait for ever.
		t.queue(`UPDATE tasks SET status = 'CANCELED', avail = false, end_time = $1,
				message = 'canceled: the schedule was deleted before its HTTP target was called', updated_at = $1
			WHERE schedule_id = $2 AND schedule_id <> '' AND status = 'SCHEDULED' AND worker_ids = $3::text[]`,
			now, p.ID, []string{rota.HTTPWorkerID})
		if err := t.flush(ctx); err != nil {
			return fmt.Errorf("delete schedule %s: %w", p.ID, err)
		}
		if !deleted {
			return notFound("schedule", p.ID)
		}
		return nil
	})
}

// ScheduleLoad implements store.ScheduleStore.
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	var res store.ScheduleLoadResult
	// The revision first (a statement before the rows): changes committed
	// after it are loaded again next time, which is harmless; the other
	// order could miss one. Every change up to the revision read has
	// committed (revisions commit in order: see takeRev).
	b := &pgx.Batch{}
	b.Queue(`SELECT rev FROM schedule_rev WHERE id = 1`).QueryRow(func(row pgx.Row) error { return row.Scan(&res.Rev) })
	b.Queue(`SELECT `+scheduleCols+`, deleted FROM schedules WHERE rev > $1 ORDER BY id`, sinceRev).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var deleted bool
				sc, err := scanSchedule(rows, &deleted)
				if err != nil {
					return err
				}
				switch {
				case !deleted:
					res.Schedules = append(res.Schedules, *sc)
				case sinceRev > 0:
					res.Deleted = append(res.Deleted, sc.ID)
				}
			}
			return rows.Err()
		})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return store.ScheduleLoadResult{}, s.translate("load schedules", err)
	}
	return res, nil
}

const schedRunCols = `id, schedule_id, fire_time, schedule_attempt, status, skip_reason, triggered, held,
	stop_requested, created_at, start_time, end_time, message`

func scanScheduleRun(row pgx.Row) (rota.ScheduleRun, error) {
	var (
		r                         rota.ScheduleRun
		fire, created, start, end int64
	)
	if err := row.Scan(&r.TaskID, &r.ScheduleID, &fire, &r.Attempt, &r.Status, &r.Reason, &r.Triggered, &r.Held,
		&r.StopRequested, &created, &start, &end, &r.Message); err != nil {
		return rota.ScheduleRun{}, err
	}
	r.FireTime, r.CreatedAt, r.StartTime, r.EndTime = tm(fire), tm(created), tm(start), tm(end)
	return r, nil
}

func collectScheduleRuns(rows pgx.Rows) ([]rota.ScheduleRun, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.ScheduleRun, error) { return scanScheduleRun(row) })
}

// --- fire --------------------------------------------------------------------

// ScheduleFire implements store.ScheduleStore. The whole call is one
// transaction of two round trips, however many items it has:
//
//  1. BEGIN; lock the items' schedules (one statement, in id order); read
//     their open runs and their LastRunID/PlanRunID runs (a statement each,
//     started once the locks are held, so current: runs of a schedule are
//     inserted and released only under its lock);
//  2. Decide, per item, in Go; then one statement inserts every new run
//     (INSERT ... SELECT FROM unnest ... ON CONFLICT on tasks_schedule_fire
//     DO NOTHING RETURNING id: the ids missing are the duplicates), one
//     releases every held run named, one writes every schedule's state and
//     version, and COMMIT, all in one pipeline.
//
// Items are independent although they share the transaction: an item can
// only fail (version moved, deleted, Decide's error) before anything of it
// is written, and any store error fails the whole call, as the contract
// says, so no savepoint is needed. A state that names a new run whose fire
// time turned out to be taken is pointed at the run that exists by the
// state's statement itself (it sees the insert before it).
//
// An id given twice in one call (the engine never does that) is handled by
// splitting the items into segments without repeats, fired one after the
// other in the same transaction: a segment's writes go with the next
// segment's reads, so each costs one more round trip.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if len(ps) == 0 {
		return []store.ScheduleFireResult{}, nil
	}
	var f *fireBatch
	err := s.tx(ctx, "fire schedules", func(t *txn) error {
		f = &fireBatch{ps: ps, out: make([]store.ScheduleFireResult, len(ps)), items: make([]fireItem, len(ps))}
		if err := t.fenceFire(ctx, ps); err != nil {
			return err
		}
		for _, seg := range distinctSegments(ps) {
			if err := f.segment(ctx, t, seg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f.results(), nil
}

// distinctSegments splits the indexes of ps into runs of consecutive items
// without a repeated schedule id.
func distinctSegments(ps []store.ScheduleFireParams) [][]int {
	var segs [][]int
	var cur []int
	seen := make(map[string]bool, len(ps))
	for i := range ps {
		if seen[ps[i].ID] {
			segs = append(segs, cur)
			cur = nil
			clear(seen)
		}
		seen[ps[i].ID] = true
		cur = append(cur, i)
	}
	return append(segs, cur)
}

// fireBatch is one ScheduleFire call in progress. The callbacks of its
// write statements fill it during the flush that carries them (at the
// latest the commit); results reads it once the transaction committed.
type fireBatch struct {
	ps    []store.ScheduleFireParams
	out   []store.ScheduleFireResult
	items []fireItem
}

// fireItem is what one applied item wrote.
type fireItem struct {
	sc       *rota.Schedule // after the change (Version, Enabled, state)
	runs     []rota.ScheduleRun
	inserted map[string]bool // task ids of runs actually inserted
	release  []string        // the decision's held runs to release
	released map[string]bool // those released
}

// fireRows are the column arrays of the write statements of a segment.
type fireRows struct {
	// New runs (insertRunsSQL), with their kinds and owners.
	runID, runSched, runSkip, runMsg []string
	runFire, runAt, runEnd, runNow   []int64
	runAttempt                       []int32
	runTriggered, runHeld            []bool
	kinds                            []string
	owner                            map[string]runOwner // by task id

	// Held runs to release.
	relID, relSched, relKind []string
	relNow                   []int64
	relItem                  []int32

	// Schedule states, one per applied item.
	updItem                             []int32
	updID, updLast, updPlan             []string
	updEnabled, updLastFix, updPlanFix  []bool
	updPlanRetry, updEnded              []bool
	updHW, updNext, updPlanAt, updEndAt []int64
	updLastFire, updPlanFire            []int64
	updPlanSeq, updRepet, updDropped    []int64
	updExt, updErr                      []string
}

// runOwner is the item of a new run, and the notification it makes once
// inserted if it is ready.
type runOwner struct {
	item       int
	ready      bool
	kind       string
	runAt, now int64
}

// segment fires the items idx (no schedule twice) of the batch: it locks
// and reads (one flush), decides and queues the writes (sent with the next
// flush).
func (f *fireBatch) segment(ctx context.Context, t *txn, idx []int) error {
	ids := make([]string, len(idx))
	for j, i := range idx {
		ids[j] = f.ps[i].ID
	}
	ls, err := lockSegment(ctx, t, ids)
	if err != nil {
		return err
	}
	var w fireRows
	w.owner = map[string]runOwner{}
	kinds := map[string]bool{}
	for _, i := range idx {
		p := &f.ps[i]
		sc := ls.scheds[p.ID]
		if sc == nil {
			f.out[i].Err = notFound("schedule", p.ID)
			continue
		}
		if sc.Version != p.Version {
			f.out[i].Err = conflict("schedule %s changed meanwhile (version %d, not %d)", sc.ID, sc.Version, p.Version)
			continue
		}
		st := store.ScheduleRunState{Schedule: *sc, Open: ls.open[sc.ID]}
		st.Last = runNamed(st.Open, ls.named, sc.LastRunID)
		st.PlanRun = runNamed(st.Open, ls.named, sc.PlanRunID)
		dec, err := p.Decide(st)
		if err != nil {
			f.out[i].Err = err
			continue
		}
		f.out[i].Cancel = dec.Cancel
		if len(dec.Runs) > 0 && !kinds[sc.Kind] {
			kinds[sc.Kind] = true
			w.kinds = append(w.kinds, sc.Kind)
		}
		f.items[i].sc = w.addItem(i, sc, &dec, ms(p.Now), &f.items[i])
	}
	f.queueWrites(t, &w)
	return nil
}

// lockedSegment is what a segment read under its locks: the schedules, the
// unfinished runs of each, and their previous and plan runs, by task id.
type lockedSegment struct {
	scheds map[string]*rota.Schedule
	open   map[string][]rota.ScheduleRun
	named  map[string]rota.ScheduleRun
}

// lockSegment locks the schedules ids and reads their live run state.
func lockSegment(ctx context.Context, t *txn, ids []string) (*lockedSegment, error) {
	ls := &lockedSegment{
		scheds: make(map[string]*rota.Schedule, len(ids)),
		open:   make(map[string][]rota.ScheduleRun, len(ids)),
		named:  map[string]rota.ScheduleRun{},
	}
	// In id order (ORDER BY comes before the locking), as every batch
	// does, so that concurrent batches cannot deadlock.
	t.queue(`SELECT `+scheduleCols+` FROM schedules WHERE id = ANY ($1) AND NOT deleted
		ORDER BY id FOR NO KEY UPDATE`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			sc, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			ls.scheds[sc.ID] = sc
		}
		return rows.Err()
	})
	t.queue(`SELECT `+schedRunCols+` FROM tasks WHERE schedule_id = ANY ($1) AND schedule_id <> '' AND NOT done
		ORDER BY schedule_id, fire_time, id`, ids).Query(func(rows pgx.Rows) error {
		runs, err := collectScheduleRuns(rows)
		for _, r := range runs {
			ls.open[r.ScheduleID] = append(ls.open[r.ScheduleID], r)
		}
		return err
	})
	t.queue(`SELECT `+schedRunCols+` FROM tasks WHERE id IN (
			SELECT unnest(ARRAY[last_run_id, plan_run_id]) FROM schedules WHERE id = ANY ($1) AND NOT deleted)`,
		ids).Query(func(rows pgx.Rows) error {
		runs, err := collectScheduleRuns(rows)
		for _, r := range runs {
			ls.named[r.TaskID] = r
		}
		return err
	})
	if err := t.flush(ctx); err != nil {
		return nil, fmt.Errorf("lock schedules: %w", err)
	}
	return ls, nil
}

// addItem adds the writes of item i's decision dec on schedule sc (runs,
// releases, the new state) to w, records its runs in it and returns the
// schedule as it will be.
func (w *fireRows) addItem(i int, sc *rota.Schedule, dec *store.ScheduleDecision, now int64, it *fireItem) *rota.Schedule {
	state := dec.State
	var lastFire, planFire int64
	var lastFix, planFix bool
	for k := range dec.Runs {
		in := &dec.Runs[k]
		r := store.NewScheduleRun(sc.ID, in, now)
		it.runs = append(it.runs, r)
		w.addRun(i, sc, in, &r, now)
		if !in.Triggered {
			// The state's statement points these at the run that exists
			// for the fire time: this one, or a duplicate's.
			if state.LastRunID == in.TaskID {
				lastFix, lastFire = true, ms(in.FireTime)
			}
			if state.PlanRunID == in.TaskID {
				planFix, planFire = true, ms(in.FireTime)
			}
		}
	}
	it.release = dec.Release
	for _, id := range dec.Release {
		w.relID = append(w.relID, id)
		w.relSched = append(w.relSched, sc.ID)
		w.relKind = append(w.relKind, sc.Kind)
		w.relNow = append(w.relNow, now)
		w.relItem = append(w.relItem, int32(i))
	}
	enabled := sc.Enabled && !dec.Disable
	w.updItem = append(w.updItem, int32(i))
	w.updID = append(w.updID, sc.ID)
	w.updEnabled = append(w.updEnabled, enabled)
	w.updHW = append(w.updHW, ms(state.HighWater))
	w.updNext = append(w.updNext, ms(state.NextFire))
	w.updLast = append(w.updLast, state.LastRunID)
	w.updLastFix = append(w.updLastFix, lastFix)
	w.updLastFire = append(w.updLastFire, lastFire)
	w.updPlanSeq = append(w.updPlanSeq, state.PlanSeq)
	w.updPlanAt = append(w.updPlanAt, ms(state.PlanAt))
	w.updPlan = append(w.updPlan, state.PlanRunID)
	w.updPlanFix = append(w.updPlanFix, planFix)
	w.updPlanFire = append(w.updPlanFire, planFire)
	w.updPlanRetry = append(w.updPlanRetry, state.PlanRetry)
	w.updRepet = append(w.updRepet, state.RealRepet)
	w.updEnded = append(w.updEnded, state.Ended)
	w.updEndAt = append(w.updEndAt, ms(state.EndedAt))
	w.updDropped = append(w.updDropped, state.MisfireDropped)
	w.updExt = append(w.updExt, store.ScheduleExtStateValue(&state))
	w.updErr = append(w.updErr, state.ErrorMessage)
	next := *sc
	next.Enabled, next.ScheduleState, next.Version = enabled, state, sc.Version+1
	return &next
}

// addRun adds the insert of run r (of item i) to w.
func (w *fireRows) addRun(i int, sc *rota.Schedule, in *store.ScheduleRunInsert, r *rota.ScheduleRun, now int64) {
	runAt := in.RunAtMillis(now)
	w.runID = append(w.runID, in.TaskID)
	w.runSched = append(w.runSched, sc.ID)
	w.runSkip = append(w.runSkip, string(in.Skip))
	w.runMsg = append(w.runMsg, in.Message)
	w.runFire = append(w.runFire, ms(in.FireTime))
	w.runAt = append(w.runAt, runAt)
	w.runEnd = append(w.runEnd, ms(r.EndTime))
	w.runNow = append(w.runNow, now)
	w.runAttempt = append(w.runAttempt, int32(in.Attempt))
	w.runTriggered = append(w.runTriggered, in.Triggered)
	w.runHeld = append(w.runHeld, r.Held)
	w.owner[in.TaskID] = runOwner{item: i, ready: r.Status == rota.StatusScheduled && !r.Held,
		kind: sc.Kind, runAt: runAt, now: now}
}

// runNamed returns the run id among open, else among named; nil if none.
func runNamed(open []rota.ScheduleRun, named map[string]rota.ScheduleRun, id string) *rota.ScheduleRun {
	if r := store.OpenRun(open, id); r != nil || id == "" {
		return r
	}
	if r, ok := named[id]; ok {
		return &r
	}
	return nil
}

// insertRunsSQL inserts runs given as column arrays ($1..$11), taking the
// task's settings from its schedule's row, and returns the ids of those
// inserted: a run whose (schedule, fire time) is taken is not
// (tasks_schedule_fire; triggered runs are outside it). Runs of a schedule
// with a Target are pinned to the HTTP executor ($12). Ready runs are
// available; held and skipped ones are not.
const insertRunsSQL = `INSERT INTO tasks (id, kind, level, payload, status, avail, max_retries, workers, worker_ids,
		timeout_s, hb_timeout_s, created_at, run_at, end_time, message, schedule_id, fire_time, updated_at,
		schedule_attempt, skip_reason, triggered, held)
	SELECT p.id, s.kind, s.level, s.payload, CASE WHEN p.skip <> '' THEN 'SKIPPED' ELSE 'SCHEDULED' END,
		p.skip = '' AND NOT p.held, 0, 1, CASE WHEN s.target IS NULL THEN '{}' ELSE $12::text[] END,
		s.timeout_s, $13::int, p.now, p.run_at, p.end_time, p.message, s.id, p.fire_time, p.now,
		p.attempt, p.skip, p.triggered, p.held
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[],
			$8::text[], $9::text[], $10::bool[], $11::bool[]) WITH ORDINALITY
		AS p(id, schedule_id, fire_time, run_at, end_time, now, attempt, skip, message, triggered, held, ord)
	JOIN schedules s ON s.id = p.schedule_id
	ORDER BY p.ord
	ON CONFLICT (schedule_id, fire_time) WHERE schedule_id <> '' AND NOT triggered DO NOTHING
	RETURNING id`

// queueRuns queues the insert of the runs of w into inserted (by task id).
func queueRuns(t *txn, w *fireRows, inserted func(id string)) {
	t.upsertKinds(w.kinds)
	if len(w.runID) == 0 {
		return
	}
	t.queue(insertRunsSQL, w.runID, w.runSched, w.runFire, w.runAt, w.runEnd, w.runNow, w.runAttempt,
		w.runSkip, w.runMsg, w.runTriggered, w.runHeld, []string{rota.HTTPWorkerID}, store.DefaultHeartbeatTimeout).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				inserted(id)
			}
			return rows.Err()
		})
}

// queueWrites queues the statements of a segment; their callbacks fill
// f.items and record the notifications of what became claimable.
func (f *fireBatch) queueWrites(t *txn, w *fireRows) {
	queueRuns(t, w, func(id string) {
		o := w.owner[id]
		if o.ready {
			t.notify(o.kind, o.runAt, o.now)
		}
		it := &f.items[o.item]
		if it.inserted == nil {
			it.inserted = map[string]bool{}
		}
		it.inserted[id] = true
	})
	if len(w.relID) > 0 {
		t.queue(`UPDATE tasks SET held = false, avail = true, run_at = r.now, message = '', updated_at = r.now
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::text[]) AS r(id, schedule_id, now, item, kind)
			WHERE tasks.id = r.id AND tasks.schedule_id = r.schedule_id AND tasks.held AND NOT tasks.done
			RETURNING r.item, tasks.id, r.kind, r.now`, w.relID, w.relSched, w.relNow, w.relItem, w.relKind).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var (
						item     int32
						id, kind string
						now      int64
					)
					if err := rows.Scan(&item, &id, &kind, &now); err != nil {
						return err
					}
					it := &f.items[item]
					if it.released == nil {
						it.released = map[string]bool{}
					}
					it.released[id] = true
					t.notify(kind, now, now)
				}
				return rows.Err()
			})
	}
	if len(w.updID) == 0 {
		return
	}
	t.queue(`UPDATE schedules s SET enabled = u.enabled, high_water = u.high_water, next_fire = u.next_fire,
			last_run_id = CASE WHEN u.last_fix THEN COALESCE((SELECT t.id FROM tasks t WHERE t.schedule_id = s.id
				AND t.fire_time = u.last_fire AND t.schedule_id <> '' AND NOT t.triggered), u.last_run_id)
				ELSE u.last_run_id END,
			plan_seq = u.plan_seq, plan_at = u.plan_at,
			plan_run_id = CASE WHEN u.plan_fix THEN COALESCE((SELECT t.id FROM tasks t WHERE t.schedule_id = s.id
				AND t.fire_time = u.plan_fire AND t.schedule_id <> '' AND NOT t.triggered), u.plan_run_id)
				ELSE u.plan_run_id END,
			plan_retry = u.plan_retry, real_repet = u.real_repet, ended = u.ended, ended_at = u.ended_at,
			misfire_dropped = u.misfire_dropped, ext_state = u.ext_state, error_message = u.error_message,
			version = s.version + 1
		FROM unnest($1::int[], $2::text[], $3::bool[], $4::bigint[], $5::bigint[], $6::text[], $7::bool[],
				$8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::bool[], $13::bigint[], $14::bool[],
				$15::bigint[], $16::bool[], $17::bigint[], $18::bigint[], $19::text[], $20::text[])
			AS u(item, id, enabled, high_water, next_fire, last_run_id, last_fix, last_fire, plan_seq, plan_at,
				plan_run_id, plan_fix, plan_fire, plan_retry, real_repet, ended, ended_at, misfire_dropped,
				ext_state, error_message)
		WHERE s.id = u.id
		RETURNING u.item, s.last_run_id, s.plan_run_id`,
		w.updItem, w.updID, w.updEnabled, w.updHW, w.updNext, w.updLast, w.updLastFix, w.updLastFire,
		w.updPlanSeq, w.updPlanAt, w.updPlan, w.updPlanFix, w.updPlanFire, w.updPlanRetry, w.updRepet,
		w.updEnded, w.updEndAt, w.updDropped, w.updExt, w.updErr).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var item int32
				var last, plan string
				if err := rows.Scan(&item, &last, &plan); err != nil {
					return err
				}
				sc := f.items[item].sc
				sc.LastRunID, sc.PlanRunID = last, plan
			}
			return rows.Err()
		})
}

// results assembles the outcome of each item once the transaction
// committed.
func (f *fireBatch) results() []store.ScheduleFireResult {
	for i := range f.out {
		r, it := &f.out[i], &f.items[i]
		if r.Err != nil || it.sc == nil {
			continue
		}
		r.Schedule = it.sc
		for _, run := range it.runs {
			if it.inserted[run.TaskID] {
				r.Inserted = append(r.Inserted, run)
			} else {
				r.Duplicates = append(r.Duplicates, run.FireTime)
			}
		}
		for _, id := range it.release {
			if it.released[id] {
				r.Released = append(r.Released, id)
				delete(it.released, id) // once, if named twice
			}
		}
	}
	return f.out
}

// ScheduleTrigger implements store.ScheduleStore: a round trip to lock the
// schedule, one to insert the run, advance the schedule and commit.
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	var out *rota.ScheduleRun
	err := s.tx(ctx, "trigger schedule", func(t *txn) error {
		out = nil
		var kind string
		err := t.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&kind) },
			`SELECT kind FROM schedules WHERE id = $1 AND NOT deleted FOR NO KEY UPDATE`, p.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("schedule", p.ID)
		}
		if err != nil {
			return fmt.Errorf("lock schedule %s: %w", p.ID, err)
		}
		now := ms(p.Now)
		in := store.ScheduleRunInsert{TaskID: p.TaskID, FireTime: tm(now), Attempt: 1, Triggered: true}
		r := store.NewScheduleRun(p.ID, &in, now)
		w := fireRows{
			kinds: []string{kind}, runID: []string{p.TaskID}, runSched: []string{p.ID}, runSkip: []string{""},
			runMsg: []string{""}, runFire: []int64{now}, runAt: []int64{now}, runEnd: []int64{0}, runNow: []int64{now},
			runAttempt: []int32{1}, runTriggered: []bool{true}, runHeld: []bool{false},
		}
		queueRuns(t, &w, func(string) {}) // a taken task id fails the statement (tasks_pkey): a conflict
		t.queue(`UPDATE schedules SET last_run_id = $1, version = version + 1 WHERE id = $2`, p.TaskID, p.ID)
		t.notify(kind, now, now)
		out = &r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleRuns implements store.ScheduleStore: a range scan of
// tasks_schedule_runs, backwards.
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	limit := store.ScheduleListLimit(p.Limit)
	q := `SELECT ` + schedRunCols + ` FROM tasks WHERE schedule_id = $1 AND schedule_id <> ''`
	args := []any{p.ScheduleID, limit + 1}
	if p.Status != "" {
		args = append(args, string(p.Status))
		q += ` AND status = $` + strconv.Itoa(len(args))
	}
	if p.Cursor != "" {
		f, id, err := store.ParseScheduleRunsCursor(p.Cursor)
		if err != nil {
			return store.ScheduleRunsResult{}, err
		}
		args = append(args, f, id)
		q += fmt.Sprintf(` AND (fire_time, id) < ($%d, $%d)`, len(args)-1, len(args))
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY fire_time DESC, id DESC LIMIT $2`, args...)
	if err != nil {
		return store.ScheduleRunsResult{}, s.translate("schedule runs", err)
	}
	runs, err := collectScheduleRuns(rows)
	if err != nil {
		return store.ScheduleRunsResult{}, s.translate("schedule runs", err)
	}
	return store.ScheduleRunsPage(runs, limit), nil
}

// ScheduleOpenRuns implements store.ScheduleStore: one statement, a range
// of tasks_schedule_open per schedule.
func (s *Store) ScheduleOpenRuns(ctx context.Context, ids []string) (map[string][]rota.ScheduleRun, error) {
	out := map[string][]rota.ScheduleRun{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+schedRunCols+` FROM tasks
		WHERE schedule_id = ANY ($1) AND schedule_id <> '' AND NOT done ORDER BY schedule_id, fire_time, id`, ids)
	if err != nil {
		return nil, s.translate("open schedule runs", err)
	}
	runs, err := collectScheduleRuns(rows)
	if err != nil {
		return nil, s.translate("open schedule runs", err)
	}
	for _, r := range runs {
		out[r.ScheduleID] = append(out[r.ScheduleID], r)
	}
	return out, nil
}

// ScheduleTargetKinds implements store.ScheduleStore.
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT kind FROM schedules WHERE NOT deleted AND target IS NOT NULL ORDER BY kind`)
	if err != nil {
		return nil, s.translate("schedule target kinds", err)
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.translate("schedule target kinds", err)
	}
	return kinds, nil
}
