package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
)

// TestRestartMisfire stops an engine on a real SQLite file, moves the clock
// 10 minutes forward (downtime) and starts a new engine on the same file.
func TestRestartMisfire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(base)
	path := t.TempDir() + "/rota.db"
	e := open(t, path, clk)
	mk := func(name string, pol rota.MisfirePolicy, limit int) *rota.Schedule {
		return e.add(func(s *rota.Schedule) {
			s.Name, s.CronExpr, s.MisfirePolicy, s.CatchupLimit = name, "*/10 * * * * *", pol, limit
			s.MaxConcurrency, s.OverlapAction = 1000, rota.OverlapParallel // only the misfire policy decides
		})
	}
	fireNow := mk("fire-now", rota.MisfireFireNow, 0)
	skip := mk("skip", rota.MisfireSkip, 0)
	catchUp := mk("catch-up", rota.MisfireCatchUpLimited, 4)
	e.step(sec(10))
	e.step(sec(10))
	for _, s := range []*rota.Schedule{fireNow, skip, catchUp} {
		e.wantRuns(s.ID, "+10s:SCHEDULED#1", "+20s:SCHEDULED#1")
	}
	e.eng.Stop()
	e.st.Close()

	// Ten minutes of downtime: fire times +30s … +10m20s (60 of them) missed.
	clk.Advance(10*time.Minute + 300*time.Millisecond)
	e2 := open(t, path, clk)
	e2.ids = e.ids
	e2.pass()

	count := func(runs []rota.ScheduleRun, status rota.Status) int {
		n := 0
		for _, r := range runs {
			if r.Status == status {
				n++
			}
		}
		return n
	}
	// FIRE_NOW: every missed time (60 ≤ the cap of 100).
	runs := e2.runs(fireNow.ID)
	if got := count(runs, rota.StatusScheduled); got != 2+60 || count(runs, rota.StatusSkipped) != 0 {
		t.Fatalf("FIRE_NOW: %d scheduled, %d skipped; want 62, 0", got, count(runs, rota.StatusSkipped))
	}
	// SKIP: only the current fire time (+10m20s, 300 ms ago); the 59 others
	// are SKIPPED with reason misfire.
	runs = e2.runs(skip.ID)
	if got := summary(runs[len(runs)-2:]); fmt.Sprint(got) != "[+10m10s:SKIPPED(misfire) +10m20s:SCHEDULED#1]" {
		t.Fatalf("SKIP: last runs %v", got)
	}
	if count(runs, rota.StatusSkipped) != 59 || count(runs, rota.StatusScheduled) != 3 || e2.get(skip.ID).MisfireDropped != 59 {
		t.Fatalf("SKIP: %d skipped, %d scheduled, dropped %d", count(runs, rota.StatusSkipped), count(runs, rota.StatusScheduled), e2.get(skip.ID).MisfireDropped)
	}
	// CATCH_UP_LIMITED 4: the latest four.
	runs = e2.runs(catchUp.ID)
	got := summary(runs[len(runs)-5:])
	if fmt.Sprint(got) != "[+9m40s:SKIPPED(misfire) +9m50s:SCHEDULED#1 +10m0s:SCHEDULED#1 +10m10s:SCHEDULED#1 +10m20s:SCHEDULED#1]" {
		t.Fatalf("CATCH_UP_LIMITED: last runs %v", got)
	}
	if count(runs, rota.StatusSkipped) != 56 {
		t.Fatalf("CATCH_UP_LIMITED: %d skipped, want 56", count(runs, rota.StatusSkipped))
	}
	if n := e2.counter(e2.m.MisfireDropped); n != 59+56 {
		t.Fatalf("rota_misfire_dropped_total = %v, want %d", n, 59+56)
	}
	// Nothing fires twice afterwards.
	e2.step(sec(10))
	for _, s := range []*rota.Schedule{fireNow, skip, catchUp} {
		assertOnePerFireTime(t, e2.runs(s.ID))
	}
}

func assertOnePerFireTime(t *testing.T, runs []rota.ScheduleRun) {
	t.Helper()
	seen := map[time.Time]int{}
	for _, r := range runs {
		if !r.Triggered {
			seen[r.FireTime]++
		}
	}
	for ft, n := range seen {
		if n != 1 {
			t.Fatalf("fire time %v has %d runs", ft, n)
		}
	}
}

// TestCatchUpCap: a schedule stopped for a year does not flood the queue.
func TestCatchUpCap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.CronExpr, s.MisfirePolicy, s.MaxConcurrency, s.OverlapAction = "* * * * * *", rota.MisfireFireNow, 1000, rota.OverlapParallel
	})
	e.clk.Advance(365 * 24 * time.Hour)
	start := time.Now()
	e.pass()
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("catching up a year took %v", d)
	}
	runs := e.runs(s.ID)
	sched, skipped := 0, 0
	for _, r := range runs {
		switch r.Status {
		case rota.StatusScheduled:
			sched++
		case rota.StatusSkipped:
			skipped++
		}
	}
	const year = 365 * 24 * 3600
	if sched != schedule.DefaultMaxCatchUp || skipped != schedule.DefaultMaxMisfireRecords {
		t.Fatalf("%d fired, %d recorded; want %d and %d", sched, skipped, schedule.DefaultMaxCatchUp, schedule.DefaultMaxMisfireRecords)
	}
	if got := e.get(s.ID).MisfireDropped; got != year-schedule.DefaultMaxCatchUp {
		t.Fatalf("MisfireDropped = %d, want %d", got, year-schedule.DefaultMaxCatchUp)
	}
	if n := e.counter(e.m.MisfireDropped); n != year-schedule.DefaultMaxCatchUp {
		t.Fatalf("rota_misfire_dropped_total = %v", n)
	}
}

// TestStallInProcess: the engine itself was late (a stall), not down.
func TestStallInProcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.MisfirePolicy = rota.MisfireSkip })
	e.step(sec(5))
	e.clk.Advance(sec(17)) // fires +10, +15, +20 missed; now +22
	e.pass()
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SKIPPED(misfire)", "+15s:SKIPPED(misfire)", "+20s:SKIPPED(misfire)")
	e.step(sec(3))
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SKIPPED(misfire)", "+15s:SKIPPED(misfire)", "+20s:SKIPPED(misfire)", "+25s:SKIPPED(concurrency)")
}

func TestClockJumpBackFiresNothingHandled(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.MaxConcurrency, s.OverlapAction = 100, rota.OverlapParallel })
	for range 4 {
		e.step(sec(5))
	}
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SCHEDULED#1", "+15s:SCHEDULED#1", "+20s:SCHEDULED#1")
	e.clk.Set(base.Add(sec(7))) // 13 s back
	e.pass()
	for range 4 {
		e.step(sec(3)) // +10 … +19: all handled already
	}
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SCHEDULED#1", "+15s:SCHEDULED#1", "+20s:SCHEDULED#1")
	e.step(sec(6)) // +25
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SCHEDULED#1", "+15s:SCHEDULED#1", "+20s:SCHEDULED#1", "+25s:SCHEDULED#1")
}

func TestEditNeverFiresRetroactively(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.CronExpr, s.MisfirePolicy, s.MaxConcurrency, s.OverlapAction = "0 * * * * *", rota.MisfireFireNow, 100, rota.OverlapParallel
	})
	e.step(time.Minute)
	e.wantRuns(s.ID, "+1m0s:SCHEDULED#1")
	// The engine is down for 30 s; meanwhile the schedule is changed to
	// every 5 seconds. The new expression's times before the edit (+1m5s …
	// +1m30s) must not fire, FIRE_NOW notwithstanding.
	e.clk.Advance(30*time.Second + 500*time.Millisecond)
	e.edit(s.ID, func(s *rota.Schedule) { s.CronExpr = "*/5 * * * * *" })
	e.pass()
	e.wantRuns(s.ID, "+1m0s:SCHEDULED#1")
	e.step(4500 * time.Millisecond)
	e.wantRuns(s.ID, "+1m0s:SCHEDULED#1", "+1m35s:SCHEDULED#1")
}

func TestPauseResumeMisfireFromResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) {
		s.MisfirePolicy, s.MaxConcurrency, s.OverlapAction = rota.MisfireFireNow, 100, rota.OverlapParallel
	})
	e.step(sec(5))
	e.edit(s.ID, func(s *rota.Schedule) { s.Enabled = false })
	for range 10 {
		e.step(sec(5)) // paused: fires nothing
	}
	e.wantRuns(s.ID, "+5s:SCHEDULED#1")
	e.clk.Advance(sec(2)) // +57s
	e.edit(s.ID, func(s *rota.Schedule) { s.Enabled = true })
	e.pass()
	e.wantRuns(s.ID, "+5s:SCHEDULED#1") // nothing of the pause caught up
	// Now the engine is down 10 s after the resume: FIRE_NOW catches up
	// those (+1m0s, +1m5s), not the paused ones.
	e.clk.Advance(sec(10))
	e.pass()
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+1m0s:SCHEDULED#1", "+1m5s:SCHEDULED#1")
}

func TestDisabledAndDeletedFireNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	off := e.add(func(s *rota.Schedule) { s.Enabled = false })
	gone := e.add(nil)
	e.step(sec(5))
	e.wantRuns(gone.ID, "+5s:SCHEDULED#1")
	if err := e.st.ScheduleDelete(e.ctx, store.ScheduleDeleteParams{ID: gone.ID, Now: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e.eng.Changed(gone.ID)
	for range 3 {
		e.step(sec(5))
	}
	e.wantRuns(off.ID)
	e.wantRuns(gone.ID, "+5s:SCHEDULED#1")
}

func TestTriggerFiresOnceNow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(func(s *rota.Schedule) { s.MaxConcurrency, s.OverlapAction = 10, rota.OverlapParallel })
	e.step(sec(5))
	// A trigger at exactly a regular fire time (+10s) does not collide
	// with it.
	e.clk.Advance(sec(5))
	if _, err := e.st.ScheduleTrigger(e.ctx, store.ScheduleTriggerParams{ID: s.ID, TaskID: e.ids.New(e.clk.Now()), Now: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e.eng.Changed(s.ID)
	e.pass()
	runs := e.runs(s.ID)
	if len(runs) != 3 {
		t.Fatalf("runs: %v", summary(runs))
	}
	trig := 0
	for _, r := range runs {
		if r.Triggered {
			trig++
			if !r.FireTime.Equal(base.Add(sec(10))) || r.Attempt != 1 {
				t.Fatalf("triggered run: %+v", r)
			}
		}
	}
	if trig != 1 {
		t.Fatalf("%d triggered runs", trig)
	}
}

// TestTwoEnginesNeverDoubleFire runs two leaders (a split brain) on the
// same store and fake clock; every fire time must still have one run.
func TestTwoEnginesNeverDoubleFire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	other := e.newEngine()
	var ids []string
	for i := range 20 {
		s := e.add(func(s *rota.Schedule) {
			s.CronExpr = []string{"* * * * * *", "*/2 * * * * *", "*/3 * * * * *"}[i%3]
			s.MaxConcurrency, s.OverlapAction, s.MisfirePolicy = 1000, rota.OverlapParallel, rota.MisfireFireNow
		})
		other.Changed(s.ID)
		ids = append(ids, s.ID)
	}
	for i := range 30 {
		e.clk.Advance(time.Second)
		if i%7 == 3 {
			e.clk.Advance(1500 * time.Millisecond) // a stall: catch-ups race too
		}
		var wg sync.WaitGroup
		for _, eng := range []*schedule.Engine{e.eng, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := eng.RunOnce(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	total := 0
	for _, id := range ids {
		runs := e.runs(id)
		assertOnePerFireTime(t, runs)
		total += len(runs)
	}
	if total < 200 {
		t.Fatalf("only %d runs fired", total)
	}
}

// TestLeadershipMoves: a follower fires nothing; on gaining leadership it
// loads the schedules and continues from the stored high-water mark.
func TestLeadershipMoves(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.add(nil)
	follower := e.newEngine()
	follower.SetLeader(false)
	e.step(sec(5))
	if _, err := follower.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.eng.SetLeader(false)
	e.clk.Advance(sec(5))
	e.pass() // no longer leader: nothing
	e.wantRuns(s.ID, "+5s:SCHEDULED#1")
	follower.SetLeader(true)
	if _, err := follower.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.wantRuns(s.ID, "+5s:SCHEDULED#1", "+10s:SKIPPED(concurrency)")
}
