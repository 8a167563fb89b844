package pgstore_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storetest"
)

// briefOf is the part of task t that a store.RunCompleteParams.Brief
// answer to a report on run runID holds.
func briefOf(t *rota.Task, runID string) rota.Task {
	out := rota.Task{ID: t.ID, Kind: t.Kind, Status: t.Status, Attempt: t.Attempt, Message: t.Message,
		Result: t.Result, RunAt: t.RunAt, EndTime: t.EndTime, ScheduleID: t.ScheduleID, FireTime: t.FireTime,
		Dependents: t.Dependents}
	for _, r := range t.Runs {
		if r.ID == runID {
			out.Runs = append(out.Runs, rota.Run{ID: r.ID, WorkerID: r.WorkerID, Status: r.Status,
				Attempt: r.Attempt, Message: r.Message})
		}
	}
	return out
}

// TestCompleteBrief settles success reports that ask for a brief answer
// together (the fast path's brief statement) and checks each answer
// against the task read afterwards, field by field of what Brief
// promises: with and without a result, a fired task, a task with a
// dependent, a second attempt, a task of a capped kind. It also checks
// that the answers are brief (no payload), so that the statement that
// made them is the brief one.
func TestCompleteBrief(t *testing.T) {
	t.Parallel()
	st := openSchema(t, newSchema(t), "brief")
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	capped := 5
	if _, err := st.KindUpsert(t.Context(), store.KindUpsertParams{Name: "capped", MaxRunning: &capped}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	add := func(p store.TaskInsertParams) {
		ids = append(ids, f.Insert(p).ID)
	}
	add(f.Params("k", now))
	add(f.Params("k", now))
	fired := f.Params("k", now)
	fired.ScheduleID, fired.FireTime = "sched-1", now.Add(-time.Second)
	add(fired)
	parent := f.Params("k", now)
	add(parent)
	child := f.Params("other", now)
	child.DependsOn = []string{parent.ID}
	f.Insert(child)
	add(f.Params("capped", now))
	retried := f.Params("again", now)
	add(retried)
	first := f.ClaimOne("w1", now, "again")
	f.Fail("w1", first.RunID, now, func(int) time.Duration { return 0 })

	later := now.Add(time.Second)
	res, err := st.TaskClaim(t.Context(), store.TaskClaimParams{WorkerID: "w1", Kinds: []string{"k", "capped", "again"},
		Max: 100, Now: later, NewRunID: f.NewRunID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(ids) {
		t.Fatalf("claimed %d runs, want %d", len(res.Runs), len(ids))
	}
	ps := make([]store.RunCompleteParams, len(res.Runs))
	for i, r := range res.Runs {
		ps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: later.Add(time.Second),
			Message: fmt.Sprintf("done %d", i), Brief: true}
		if i%2 == 0 {
			ps[i].Result = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		}
	}
	tasks, errs := st.RunCompleteMany(t.Context(), ps)
	for i, p := range ps {
		if errs[i] != nil {
			t.Fatalf("report %d: %v", i, errs[i])
		}
		got := tasks[i]
		if got.Payload != nil {
			t.Errorf("report %d: the answer has the task's payload: not a brief answer", i)
		}
		want := f.Get(got.ID)
		if want.Status != rota.StatusSuccess {
			t.Fatalf("task %s is %s after its success", want.ID, want.Status)
		}
		if d := cmp.Diff(briefOf(want, p.RunID), briefOf(got, p.RunID)); d != "" {
			t.Errorf("report %d: brief answer differs from the task read (-read +answer):\n%s", i, d)
		}
		if len(got.Runs) != 1 || got.Runs[0].ID != p.RunID {
			t.Errorf("report %d: the answer's runs are %v, want the reported run alone", i, got.Runs)
		}
	}
}

// BenchmarkCompleteReports settles 100 success reports of one request
// (RunCompleteMany, the completers' fast path), as POST /api/runs/reports
// does, with and without Brief; the insert and the claim of each round are
// not counted. allocs/report and B/report are the server's cost of a
// report in the store (a brief answer's was a third of the objects the
// server allocated in an end-to-end run, as the whole task).
func BenchmarkCompleteReports(b *testing.B) {
	for _, brief := range []bool{false, true} {
		b.Run(fmt.Sprintf("brief=%v", brief), func(b *testing.B) {
			st := openSchema(b, newSchema(b), "bench")
			f := storetest.NewFixture(b, st)
			const n = 100
			now := f.At(0)
			var allocs, bytes uint64
			var before, after runtime.MemStats
			for b.Loop() {
				b.StopTimer()
				runs := f.InsertClaimMany("k", "w1", now, n)
				ps := make([]store.RunCompleteParams, n)
				for i, r := range runs {
					ps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now, Brief: brief}
				}
				runtime.ReadMemStats(&before)
				b.StartTimer()
				_, errs := st.RunCompleteMany(b.Context(), ps)
				b.StopTimer()
				runtime.ReadMemStats(&after)
				allocs += after.Mallocs - before.Mallocs
				bytes += after.TotalAlloc - before.TotalAlloc
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(allocs)/float64(b.N*n), "allocs/report")
			b.ReportMetric(float64(bytes)/float64(b.N*n), "B/report")
		})
	}
}
