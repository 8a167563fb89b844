package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// The hot paths MeasureCost measures, in its order.
const (
	// CostInsert is TaskInsert of one unkeyed task of a known kind.
	CostInsert = "insert"
	// CostClaim is TaskClaim (Max 1) that gets one task.
	CostClaim = "claim"
	// CostHeartbeat is RunHeartbeat of a running run.
	CostHeartbeat = "heartbeat"
	// CostComplete is RunComplete (success) of a run, alone.
	CostComplete = "complete"
	// CostClaimEmpty is TaskClaim that finds nothing (a long-polling
	// worker's wake-up).
	CostClaimEmpty = "claim, empty"
	// CostInsertBatch is TaskInsertMany of CostBatch unkeyed tasks.
	CostInsertBatch = "insert batch"
	// CostClaimBatch is TaskClaim (Max CostBatch) that gets CostBatch
	// tasks.
	CostClaimBatch = "claim batch"
	// CostFire is ScheduleFire of one schedule whose decision inserts one
	// run (a cron tick).
	CostFire = "schedule fire"
	// CostEventAppend is EventAppend of CostTaskEvents events: what a
	// node's appender writes for one task (submit 1, claim 2, complete 2)
	// when it goes alone; under load one append carries many tasks'.
	CostEventAppend = "event append"
)

// CostTaskEvents is how many events one task makes going through submit,
// claim and complete.
const CostTaskEvents = 5

// CostBatch is the size of MeasureCost's batches.
const CostBatch = 10

// Cost is what one hot path cost, as counted by a storecost.Counter, and
// the row writes the database counted (PostgreSQL only; zero elsewhere).
type Cost struct {
	Step   string
	Counts storecost.Counts
	Rows   storecost.Rows // summed over the tables
}

// MeasureCost runs each hot path (the Cost* steps) on st, whose
// statements c counts (the store must have been opened with c as its
// Config.Cost), and returns what each cost the caller. rows, when not
// nil, returns the row writes the database has counted per table so far
// (pgstore's RowWrites); each step's Rows is then its difference. The
// whole sequence runs twice first, unmeasured, so that statements are
// prepared and kinds known: the figures are those of a warmed-up store.
// st must be empty.
func MeasureCost(tb testing.TB, st store.Store, c *storecost.Counter, rows func() map[string]storecost.Rows) []Cost {
	tb.Helper()
	f := NewFixture(tb, st)
	m := &costMeter{tb: tb, c: c, rows: rows}
	sc := costSchedule(f)
	for m.pass = range costPasses {
		now := f.At(time.Duration(m.pass)*time.Hour + time.Second)
		measureTaskPath(m, f, now)
		measureBatches(m, f, st, now)
		sc = measureFire(m, f, st, sc)
		measureEvents(m, f, st, now)
	}
	return m.out
}

// costPasses is how many times MeasureCost runs the paths: all but the last
// warm up (a statement missed in one is prepared after it).
const costPasses = 3

// costMeter measures the steps of MeasureCost's passes and keeps the
// last pass's.
type costMeter struct {
	tb   testing.TB
	c    *storecost.Counter
	rows func() map[string]storecost.Rows // nil where the store counts no rows
	pass int
	out  []Cost
}

// measure runs fn and, on the last pass, records what it cost as step name.
func (m *costMeter) measure(name string, fn func()) {
	m.tb.Helper()
	last := m.pass == costPasses-1
	var rows0 map[string]storecost.Rows
	if m.rows != nil && last {
		rows0 = m.rows()
	}
	before := m.c.Snapshot()
	fn()
	d := m.c.Snapshot().Sub(before).Caller
	// A prepare is a connection's first use of a statement: the warm-up is
	// there to leave it out, but a pool connection the warm-up did not
	// reach (the notifier or RowWrites held the warm one) may still need
	// one. It is not the path's cost.
	d.RoundTrips -= d.Prepares
	if !last {
		return
	}
	cost := Cost{Step: name, Counts: d}
	if m.rows != nil {
		cost.Rows = storecost.SumTables(storecost.SubTables(m.rows(), rows0))
	}
	m.out = append(m.out, cost)
}

// measureTaskPath measures one task's path: insert, claim, heartbeat,
// complete, then a claim that finds nothing.
func measureTaskPath(m *costMeter, f *Fixture, now time.Time) {
	var run rota.ClaimedRun
	m.measure(CostInsert, func() { f.InsertNew(kindK, now) })
	m.measure(CostClaim, func() { run = f.ClaimOne("w1", now, kindK) })
	m.measure(CostHeartbeat, func() { f.Heartbeat("w1", run.RunID, now) })
	m.measure(CostComplete, func() { f.Succeed("w1", run.RunID, now) })
	m.measure(CostClaimEmpty, func() { f.ClaimNone("w1", now, kindK) })
}

// measureBatches measures an insert and a claim of CostBatch tasks.
func measureBatches(m *costMeter, f *Fixture, st store.Store, now time.Time) {
	ps := make([]store.TaskInsertParams, CostBatch)
	for i := range ps {
		ps[i] = f.Params(kindK, now)
	}
	m.measure(CostInsertBatch, func() {
		if _, err := st.TaskInsertMany(f.Ctx(), ps); err != nil {
			m.tb.Fatalf("TaskInsertMany: %v", err)
		}
	})
	var runs []rota.ClaimedRun
	m.measure(CostClaimBatch, func() { runs = f.Claim("w1", now, CostBatch, kindK).Runs })
	if len(runs) != CostBatch {
		m.tb.Fatalf("claim batch: got %d runs, want %d", len(runs), CostBatch)
	}
	for _, r := range runs {
		f.Succeed("w1", r.RunID, now)
	}
}

// measureFire measures one cron tick of sc (a fire of one run) and returns
// the schedule as it left it.
func measureFire(m *costMeter, f *Fixture, st store.Store, sc *rota.Schedule) *rota.Schedule {
	fire := sc.NextFire
	m.measure(CostFire, func() {
		res, err := st.ScheduleFire(f.Ctx(), []store.ScheduleFireParams{{ID: sc.ID, Version: sc.Version, Now: fire,
			Decide: func(s store.ScheduleRunState) (store.ScheduleDecision, error) {
				state := s.Schedule.ScheduleState
				state.HighWater, state.NextFire = fire, fire.Add(5*time.Second)
				return store.ScheduleDecision{
					Runs:  []store.ScheduleRunInsert{{TaskID: f.NewTaskID(fire), FireTime: fire}},
					State: state,
				}, nil
			}}})
		if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Inserted) != 1 {
			m.tb.Fatalf("ScheduleFire: %v %+v", err, res)
		}
		sc = res[0].Schedule
	})
	return sc
}

// measureEvents measures an append of a task's worth of events.
func measureEvents(m *costMeter, f *Fixture, st store.Store, now time.Time) {
	evs := make([]rota.Event, CostTaskEvents)
	for i := range evs {
		evs[i] = rota.Event{Time: now, Type: rota.EventTask, Kind: kindK, TaskID: f.NewTaskID(now), Status: rota.StatusRunning}
	}
	m.measure(CostEventAppend, func() {
		if _, err := st.EventAppend(f.Ctx(), evs); err != nil {
			m.tb.Fatalf("EventAppend: %v", err)
		}
	})
}

// costSchedule stores an enabled schedule of a kind of its own (its runs
// must not be claimed by MeasureCost's claims).
func costSchedule(f *Fixture) *rota.Schedule {
	f.TB.Helper()
	now := f.At(0)
	sc, err := f.Store.ScheduleInsert(f.Ctx(), store.ScheduleInsertParams{Now: now, Schedule: rota.Schedule{
		ID: f.NewTaskID(now), Name: "cost", Kind: "cron", Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{}`), CronExpr: "*/5 * * * * *", Timezone: "UTC", Enabled: true,
		MaxConcurrency: 10, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow,
		FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, CatchupLimit: 3, TimeoutSeconds: 10,
		ScheduleState: rota.ScheduleState{HighWater: now, NextFire: now.Add(5 * time.Second)},
	}})
	if err != nil {
		f.TB.Fatalf("ScheduleInsert: %v", err)
	}
	return sc
}

// WantHotPathCost measures the hot paths on st as MeasureCost does, logs
// the table under backend's name, fails tb unless their statements,
// round trips and commits are those of want (as WantCost), and returns
// the costs measured.
func WantHotPathCost(tb testing.TB, backend string, st store.Store, c *storecost.Counter,
	rows func() map[string]storecost.Rows, want map[string]storecost.Counts) []Cost {
	tb.Helper()
	got := MeasureCost(tb, st, c, rows)
	tb.Logf("%s:\n%s", backend, CostTable(got))
	WantCost(tb, got, want)
	return got
}

// Transaction is the cost of one transaction (one commit) of statements
// statements sent in roundTrips round trips.
func Transaction(statements, roundTrips int64) storecost.Counts {
	return storecost.Counts{Statements: statements, RoundTrips: roundTrips, Commits: 1}
}

// WantCost fails tb unless got has exactly the statements, round trips
// and commits of want (Prepares are not compared: a store may prepare a
// statement lazily, after the operation that first ran it).
func WantCost(tb testing.TB, got []Cost, want map[string]storecost.Counts) {
	tb.Helper()
	have := make(map[string]storecost.Counts, len(got))
	for _, c := range got {
		c.Counts.Prepares = 0
		have[c.Step] = c.Counts
	}
	if d := cmp.Diff(want, have); d != "" {
		tb.Errorf("cost of the hot paths (-want +got):\n%s\nmeasured:\n%s", d, CostTable(got))
	}
}

// WantRows fails tb unless got wrote exactly the row versions of want
// (inserted, updated, deleted; HOT updates are not compared: whether an
// update is HOT depends on the room left in its page).
func WantRows(tb testing.TB, got []Cost, want map[string]storecost.Rows) {
	tb.Helper()
	have := make(map[string]storecost.Rows, len(got))
	for _, c := range got {
		c.Rows.HotUpdated = 0
		have[c.Step] = c.Rows
	}
	if d := cmp.Diff(want, have); d != "" {
		tb.Errorf("row writes of the hot paths (-want +got):\n%s\nmeasured:\n%s", d, CostTable(got))
	}
}

// CostTable renders costs as a Markdown table (for logs and docs).
func CostTable(cs []Cost) string {
	var b strings.Builder
	b.WriteString("| step | statements | round trips | commits | row versions (HOT) |\n|---|---:|---:|---:|---:|\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d (%d) |\n", c.Step, c.Counts.Statements, c.Counts.RoundTrips, c.Counts.Commits,
			c.Rows.Versions(), c.Rows.HotUpdated)
	}
	return b.String()
}
