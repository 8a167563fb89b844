package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// schedDoc is a schedule's record: its row of store.ScheduleColumns (read
// back with store.ScheduleRow), deletion and revision.
type schedDoc struct {
	Row     json.RawMessage `json:"r"`
	Deleted bool            `json:"del,omitempty"`
	Rev     int64           `json:"rev"`
}

func (s *Store) kSched(id string) string       { return s.p + "sc:" + id }
func (s *Store) kSchedName(name string) string { return s.p + "scn:" + name }
func (s *Store) kSchedIDs() string             { return s.p + "scids" }
func (s *Store) kSchedRev() string             { return s.p + "screv" }
func (s *Store) kSchedChanges() string         { return s.p + "scchg" }

// scheduleRow is sc as a row of store.ScheduleColumns.
func scheduleRow(sc *rota.Schedule) (json.RawMessage, error) {
	plan, target, err := store.ScheduleJSONValues(sc)
	if err != nil {
		return nil, err
	}
	bytesOf := func(v any) []byte {
		if s, ok := v.(string); ok {
			return []byte(s)
		}
		return nil
	}
	var payload []byte
	if sc.Payload != nil {
		payload = []byte(sc.Payload)
	}
	st := &sc.ScheduleState
	return json.Marshal([]any{sc.ID, sc.Name, sc.Kind, sc.Priority.Level(), payload, sc.CronExpr, sc.Timezone,
		bytesOf(plan), sc.Enabled, sc.MaxConcurrency, sc.ConcurrencyPolicy, sc.OverlapAction, sc.FailureAction,
		sc.MisfirePolicy, sc.CatchupLimit, sc.TimeoutSeconds, bytesOf(target), sc.Version, ms(sc.CreatedAt),
		ms(sc.UpdatedAt), ms(st.HighWater), ms(st.NextFire), st.LastRunID, st.PlanSeq, ms(st.PlanAt), st.PlanRunID,
		st.PlanRetry, st.RealRepet, st.Ended, ms(st.EndedAt), st.MisfireDropped, store.ScheduleOptionsValue(sc),
		store.ScheduleExtStateValue(st), st.ErrorMessage})
}

func (d *schedDoc) schedule() (*rota.Schedule, error) {
	var r row
	if err := json.Unmarshal(d.Row, &r); err != nil {
		return nil, err
	}
	var sr store.ScheduleRow
	if err := r.Scan(sr.Dest()...); err != nil {
		return nil, err
	}
	return sr.Schedule()
}

// getSched reads schedule id, guarded; rota.ErrNotFound when absent or
// deleted (deleted: the doc is returned too).
func (t *tx) getSched(id string) (*rota.Schedule, *schedDoc, error) {
	var d schedDoc
	found, err := t.get(t.s.kSched(id), &d)
	if err != nil {
		return nil, nil, err
	}
	if !found || d.Deleted {
		return nil, nil, store.NotFoundError("schedule", id)
	}
	sc, err := d.schedule()
	return sc, &d, err
}

// putSched writes schedule sc; with config, a configuration change that
// takes the next revision (ScheduleLoad).
func (t *tx) putSched(sc *rota.Schedule, deleted, config bool, rev int64) error {
	b, err := scheduleRow(sc)
	if err != nil {
		return err
	}
	if config {
		var cur int64
		if _, err := t.get(t.s.kSchedRev(), &cur); err != nil {
			return err
		}
		rev = cur + 1
		if err := t.put(t.s.kSchedRev(), rev); err != nil {
			return err
		}
		t.zadd(t.s.kSchedChanges(), float64(rev), sc.ID)
	}
	return t.put(t.s.kSched(sc.ID), schedDoc{Row: b, Deleted: deleted, Rev: rev})
}

// claimName makes name point to id, or fails with rota.ErrConflict when
// another schedule holds it.
func (t *tx) claimName(name, id string) error {
	var holder string
	found, err := t.get(t.s.kSchedName(name), &holder)
	if err != nil {
		return err
	}
	if found && holder != id {
		return store.ConflictError("a schedule named %q already exists", name)
	}
	return t.put(t.s.kSchedName(name), id)
}

// ScheduleInsert implements store.ScheduleStore.
func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	sc := p.Schedule
	sc.Version = 1
	sc.CreatedAt, sc.UpdatedAt = tm(ms(p.Now)), tm(ms(p.Now))
	err := s.update(ctx, "insert schedule", func(t *tx) error {
		t.guard(s.kSched(sc.ID), 0)
		if err := t.claimName(sc.Name, sc.ID); err != nil {
			return err
		}
		t.zadd(s.kSchedIDs(), 0, sc.ID)
		return t.putSched(&sc, false, true, 0)
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error) {
	var out *rota.Schedule
	err := s.update(ctx, "get schedule", func(t *tx) error {
		var err error
		out, _, err = t.getSched(id)
		return err
	})
	return out, err
}

// ScheduleGetByName implements store.ScheduleStore.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	var id string
	err := s.readDocs(ctx, []string{s.kSchedName(name)}, func(_ int, b []byte) error { return json.Unmarshal(b, &id) })
	if err != nil {
		return nil, s.wrap("get schedule", err)
	}
	if id == "" {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	sc, err := s.ScheduleGet(ctx, id)
	if errors.Is(err, rota.ErrNotFound) {
		return nil, rota.Errorf(rota.CodeNotFound, "schedule named %q not found", name)
	}
	return sc, err
}

// scheduleState reports whether sc is in state (store.ScheduleStateFilter
// as a predicate).
func scheduleState(sc *rota.Schedule, state string) bool {
	switch state {
	case rota.StateError:
		return sc.ErrorMessage != ""
	case rota.StateEnded:
		return sc.ErrorMessage == "" && sc.Ended
	case rota.StatePaused:
		return sc.ErrorMessage == "" && !sc.Ended && !sc.Enabled
	case rota.StateActive:
		return sc.ErrorMessage == "" && !sc.Ended && sc.Enabled
	}
	return true
}

// loadScheds reads the undeleted schedules ids.
func (s *Store) loadScheds(ctx context.Context, ids []string, fn func(*rota.Schedule, *schedDoc)) error {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.kSched(id)
	}
	return s.readDocs(ctx, keys, func(_ int, b []byte) error {
		var d schedDoc
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		sc, err := d.schedule()
		if err != nil {
			return err
		}
		fn(sc, &d)
		return nil
	})
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	limit := store.ScheduleListLimit(p.Limit)
	max := "+"
	if p.Cursor != "" {
		max = "(" + p.Cursor
	}
	var out []rota.Schedule
	for len(out) <= limit {
		ids, err := s.rdb.ZRevRangeByLex(ctx, s.kSchedIDs(), &redis.ZRangeBy{Min: "-", Max: max, Count: 200}).Result()
		if err != nil {
			return store.ScheduleListResult{}, s.wrap("list schedules", err)
		}
		err = s.loadScheds(ctx, ids, func(sc *rota.Schedule, d *schedDoc) {
			if !d.Deleted && scheduleState(sc, p.State) && len(out) <= limit {
				out = append(out, *sc)
			}
		})
		if err != nil {
			return store.ScheduleListResult{}, s.wrap("list schedules", err)
		}
		if len(ids) < 200 {
			break
		}
		max = "(" + ids[len(ids)-1]
	}
	return store.ScheduleListPage(out, limit), nil
}

// ScheduleUpdate implements store.ScheduleStore.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleUpdateParams) (*rota.Schedule, error) {
	sc := p.Schedule
	err := s.update(ctx, "update schedule", func(t *tx) error {
		cur, _, err := t.getSched(sc.ID)
		if err != nil {
			return err
		}
		if cur.Version != sc.Version {
			return store.ConflictError("schedule %s changed meanwhile (version %d, not %d): read it again", sc.ID, cur.Version, sc.Version)
		}
		if err := t.claimName(sc.Name, sc.ID); err != nil {
			return err
		}
		if cur.Name != sc.Name {
			t.del(s.kSchedName(cur.Name))
		}
		next := sc
		next.Version, next.CreatedAt, next.UpdatedAt = cur.Version+1, cur.CreatedAt, tm(ms(p.Now))
		return t.putSched(&next, false, true, 0)
	})
	if err != nil {
		return nil, err
	}
	return s.ScheduleGet(ctx, sc.ID)
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return s.update(ctx, "delete schedule", func(t *tx) error {
		sc, _, err := t.getSched(p.ID)
		if err != nil {
			return err
		}
		sc.Enabled, sc.NextFire, sc.UpdatedAt = false, tm(0), tm(ms(p.Now))
		sc.Version++
		t.del(s.kSchedName(sc.Name))
		t.zrem(s.kSchedIDs(), sc.ID)
		if err := t.putSched(sc, true, true, 0); err != nil {
			return err
		}
		open, err := t.openRuns(sc.ID)
		if err != nil {
			return err
		}
		now := ms(p.Now)
		for _, d := range open {
			var msg string
			switch {
			case d.Held:
				msg = "canceled: the schedule was deleted before the run was released"
			case d.Status == rota.StatusScheduled && slices.Equal(d.WorkerIDs, []string{rota.HTTPWorkerID}):
				msg = "canceled: the schedule was deleted before its HTTP target was called"
			default:
				continue
			}
			old := d.clone()
			d.Status, d.Done, d.Avail, d.Held, d.End, d.Msg = rota.StatusCanceled, true, false, false, now, msg
			if err := t.putTask(old, d); err != nil {
				return err
			}
			if err := t.settleChildren(d, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// openRuns reads the unfinished runs of a schedule, guarded, oldest fire
// first.
func (t *tx) openRuns(id string) ([]*taskDoc, error) {
	ms, err := t.s.rdb.ZRange(t.ctx, t.s.kSchedOpen(id), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var out []*taskDoc
	for _, m := range ms {
		_, taskID, _ := strings.Cut(m, ":")
		d, err := t.getTask(taskID)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ScheduleLoad implements store.ScheduleStore.
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	var res store.ScheduleLoadResult
	err := s.readDocs(ctx, []string{s.kSchedRev()}, func(_ int, b []byte) error { return json.Unmarshal(b, &res.Rev) })
	if err != nil {
		return res, s.wrap("load schedules", err)
	}
	ids, err := s.rdb.ZRangeByScore(ctx, s.kSchedChanges(), &redis.ZRangeBy{Min: "(" + itoa(sinceRev), Max: "+inf"}).Result()
	if err != nil {
		return res, s.wrap("load schedules", err)
	}
	err = s.loadScheds(ctx, ids, func(sc *rota.Schedule, d *schedDoc) {
		switch {
		case d.Deleted && sinceRev > 0:
			res.Deleted = append(res.Deleted, sc.ID)
		case !d.Deleted:
			res.Schedules = append(res.Schedules, *sc)
		}
	})
	return res, s.wrap("load schedules", err)
}

// ScheduleRuns implements store.ScheduleStore.
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	limit := store.ScheduleListLimit(p.Limit)
	max := "+"
	if p.Cursor != "" {
		f, id, err := store.ParseScheduleRunsCursor(p.Cursor)
		if err != nil {
			return store.ScheduleRunsResult{}, err
		}
		max = "(" + schedRunMember(f, id)
	}
	var runs []rota.ScheduleRun
	for len(runs) <= limit {
		ms, err := s.rdb.ZRevRangeByLex(ctx, s.kSchedRuns(p.ScheduleID), &redis.ZRangeBy{Min: "-", Max: max, Count: 200}).Result()
		if err != nil {
			return store.ScheduleRunsResult{}, s.wrap("schedule runs", err)
		}
		ids := make([]string, len(ms))
		for i, m := range ms {
			_, ids[i], _ = strings.Cut(m, ":")
		}
		_, err = s.eachTask(ctx, ids, func(d *taskDoc) bool {
			if (p.Status == "" || d.Status == p.Status) && len(runs) <= limit {
				runs = append(runs, d.scheduleRun())
			}
			return true
		})
		if err != nil {
			return store.ScheduleRunsResult{}, s.wrap("schedule runs", err)
		}
		if len(ms) < 200 {
			break
		}
		max = "(" + ms[len(ms)-1]
	}
	return store.ScheduleRunsPage(runs, limit), nil
}

// ScheduleOpenRuns implements store.ScheduleStore.
func (s *Store) ScheduleOpenRuns(ctx context.Context, scheduleIDs []string) (map[string][]rota.ScheduleRun, error) {
	out := map[string][]rota.ScheduleRun{}
	for _, id := range scheduleIDs {
		ms, err := s.rdb.ZRange(ctx, s.kSchedOpen(id), 0, -1).Result()
		if err != nil {
			return nil, s.wrap("open schedule runs", err)
		}
		ids := make([]string, len(ms))
		for i, m := range ms {
			_, ids[i], _ = strings.Cut(m, ":")
		}
		if _, err := s.eachTask(ctx, ids, func(d *taskDoc) bool {
			out[id] = append(out[id], d.scheduleRun())
			return true
		}); err != nil {
			return nil, s.wrap("open schedule runs", err)
		}
	}
	return out, nil
}

// ScheduleTargetKinds implements store.ScheduleStore.
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.ZRange(ctx, s.kSchedIDs(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("target kinds", err)
	}
	var out []string
	err = s.loadScheds(ctx, ids, func(sc *rota.Schedule, d *schedDoc) {
		if !d.Deleted && sc.Target != nil {
			out = append(out, sc.Kind)
		}
	})
	slices.Sort(out)
	return slices.Compact(out), s.wrap("target kinds", err)
}
