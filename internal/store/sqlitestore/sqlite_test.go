package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

func open(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(tb.TempDir(), "rota.db")})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

// newDatabase creates a database of the current schema and returns its
// path, the store closed.
func newDatabase(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rota.db")
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return path
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, open)
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newDatabase(t)
	// Pretend a newer rota wrote the file.
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	storetest.WantNewerSchemaRefused(t, err)
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rota.db")
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFixture(t, st)
	task := f.InsertNew("email", f.At(0))
	st.Close()
	st2, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	got, err := st2.TaskGet(ctx, task.ID)
	if err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
	if got.Kind != "email" {
		t.Fatalf("kind = %q", got.Kind)
	}
}

// BenchmarkGroupCommit runs full task cycles (insert, claim, succeed) from
// many goroutines at once, as an HTTP server under load does: group commit
// shares each fsync among the operations queued meanwhile, so throughput
// grows with concurrency while every acknowledged write stays durable.
func BenchmarkGroupCommit(b *testing.B) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			st := open(b)
			f := storetest.NewFixture(b, st)
			var n atomic.Int64
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				worker := fmt.Sprintf("w%d", n.Add(1))
				kind := "bench-" + worker // own kind: no claim contention between goroutines
				for pb.Next() {
					now := f.At(0)
					p := f.Params(kind, now)
					if _, err := st.TaskInsert(context.Background(), p); err != nil {
						b.Error(err)
						return
					}
					res, err := st.TaskClaim(context.Background(), store.TaskClaimParams{WorkerID: worker, Kinds: []string{kind}, Max: 1, Now: now, NewRunID: f.NewRunID})
					if err != nil || len(res.Runs) != 1 {
						b.Errorf("claim: %v, %d runs", err, len(res.Runs))
						return
					}
					if _, err := st.RunComplete(context.Background(), store.RunCompleteParams{RunID: res.Runs[0].RunID, WorkerID: worker, Success: true, Now: now}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkGroupCycle measures the store's side of the end-to-end path
// under load, with full durability: per iteration, a batch of tasks is
// submitted, claimed in one claim and reported concurrently, so that the
// reports share group commits. Profile it (-cpuprofile) to see where a
// task's time goes.
func BenchmarkGroupCycle(b *testing.B) { groupCycle(b, reportConcurrently) }

// BenchmarkGroupCycleHeld is BenchmarkGroupCycle with groups made the
// same at every run: the writer is held while the reports queue, so the
// 100 reports of an iteration always commit as one group. Its work per
// iteration does not depend on scheduling, so that an instruction count
// (valgrind --tool=cachegrind, with GOGC=off and -test.cpu 1) compares
// two versions of the store.
func BenchmarkGroupCycleHeld(b *testing.B) { groupCycle(b, reportHeld) }

// BenchmarkGroupCycleMany is BenchmarkGroupCycle with the reports of an
// iteration made in one RunCompleteMany, as the server's batched report
// route makes them (dispatch.CompleteMany).
func BenchmarkGroupCycleMany(b *testing.B) { groupCycle(b, reportMany) }

// reportMode is how groupCycle reports the runs of an iteration.
type reportMode int

const (
	reportConcurrently reportMode = iota // a goroutine per report
	reportHeld                           // the same, queued while the writer is held
	reportMany                           // one RunCompleteMany
)

// groupCycle runs BenchmarkGroupCycle, its reports made as mode says.
func groupCycle(b *testing.B, mode reportMode) {
	const batch = 100
	st := open(b).(*sqlitestore.Store)
	f := storetest.NewFixture(b, st)
	now := f.At(0)
	ps := make([]store.TaskInsertParams, batch)
	errs := make(chan error, batch)
	cpu0 := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range ps {
			ps[i] = f.Params("k", now)
		}
		if _, err := st.TaskInsertMany(f.Ctx(), ps); err != nil {
			b.Fatal(err)
		}
		runs := f.Claim("w1", now, batch, "k").Runs
		if mode == reportMany {
			reps := make([]store.RunCompleteParams, len(runs))
			for i, r := range runs {
				reps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
			}
			_, errs := st.RunCompleteMany(f.Ctx(), reps)
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			continue
		}
		var release func()
		if mode == reportHeld {
			release = st.HoldWriterForTest()
		}
		for _, r := range runs {
			go func() {
				_, err := st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now})
				errs <- err
			}()
		}
		if mode == reportHeld {
			for st.QueuedForTest() < len(runs) {
				time.Sleep(100 * time.Microsecond)
			}
			release()
		}
		for range runs {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N*batch), "cpu-µs/task")
}

// processCPU is the CPU time (user and system) the process used so far:
// under a loaded machine, CPU per task is steadier than a rate.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGroupIsolatesFailedOp queues, in one group commit, inserts that
// succeed and a batch insert that fails after it wrote (its second item
// names a missing dependency): the group is run again with a savepoint per
// operation, so the failed batch leaves nothing and the others commit.
func TestGroupIsolatesFailedOp(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	const n = 8
	ok := make([]store.TaskInsertParams, n)
	for i := range ok {
		ok[i] = f.Params("k", now)
	}
	bad := []store.TaskInsertParams{f.Params("k", now), f.Params("k", now)}
	bad[1].DependsOn = []string{f.NewTaskID(now)}
	together(t, st, n+1, func(i int) error {
		if i < n {
			_, err := st.TaskInsert(f.Ctx(), ok[i])
			return err
		}
		if _, err := st.TaskInsertMany(f.Ctx(), bad); !errors.Is(err, rota.ErrInvalid) {
			return fmt.Errorf("insert with a missing dependency: %v; want invalid", err)
		}
		return nil
	})
	for _, p := range ok {
		f.Get(p.ID)
	}
	for _, p := range bad {
		if _, err := st.TaskGet(f.Ctx(), p.ID); !errors.Is(err, rota.ErrNotFound) {
			t.Fatalf("task %s of the failed batch: %v; want not found", p.ID, err)
		}
	}
}

// TestGroupedReportsRunAgainAlone queues, in one group commit, success
// reports (settled together in one statement), a report by the wrong
// worker (refused, in the middle of them) and a batch insert that fails
// after it wrote: the group is rolled back and run again with a savepoint
// per operation, each report alone, and every report ends as it would
// have alone.
func TestGroupedReportsRunAgainAlone(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	const n = 6
	for range n {
		f.InsertNew("k", now)
	}
	runs := f.Claim("w1", now, n, "k").Runs
	if len(runs) != n {
		t.Fatalf("claimed %d runs; want %d", len(runs), n)
	}
	bad := []store.TaskInsertParams{f.Params("k", now), f.Params("k", now)}
	bad[1].DependsOn = []string{f.NewTaskID(now)}
	const refused = n / 2
	together(t, st, n+1, func(i int) error {
		switch {
		case i == n:
			if _, err := st.TaskInsertMany(f.Ctx(), bad); !errors.Is(err, rota.ErrInvalid) {
				return fmt.Errorf("insert with a missing dependency: %v; want invalid", err)
			}
			return nil
		case i == refused:
			p := store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w2", Success: true, Now: now}
			if _, err := st.RunComplete(f.Ctx(), p); !errors.Is(err, rota.ErrLeaseLost) {
				return fmt.Errorf("report by another worker: %v; want lease lost", err)
			}
			return nil
		}
		task, err := st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w1", Success: true, Now: now})
		if err == nil && (task.Status != rota.StatusSuccess || len(task.Runs) != 1 || task.Runs[0].Status != rota.StatusSuccess) {
			return fmt.Errorf("reported task %s is %s with runs %+v; want SUCCESS, one run SUCCESS", task.ID, task.Status, task.Runs)
		}
		return err
	})
	for i, r := range runs {
		want := rota.StatusSuccess
		if i == refused {
			want = rota.StatusRunning
		}
		if got := f.Get(r.TaskID).Status; got != want {
			t.Errorf("task %d: %s; want %s", i, got, want)
		}
	}
}

// TestReadCacheSize checks that every read connection gets the smaller
// page cache (each one fills with a deep queue; see ReadCacheKiB) and
// that the writer keeps SQLite's default.
func TestReadCacheSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ cfg, want int }{{0, -512}, {256, -256}} {
		st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), ReadConns: 3, ReadCacheKiB: tc.cfg})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		w, rs, err := st.CacheSizesForTest(ctx)
		st.Close()
		if err != nil {
			t.Fatalf("cache sizes: %v", err)
		}
		if w != -2000 {
			t.Errorf("ReadCacheKiB %d: writer cache_size %d, want -2000", tc.cfg, w)
		}
		if len(rs) != 3 {
			t.Fatalf("ReadCacheKiB %d: %d read connections, want 3", tc.cfg, len(rs))
		}
		for i, r := range rs {
			if r != tc.want {
				t.Errorf("ReadCacheKiB %d: read connection %d cache_size %d, want %d", tc.cfg, i, r, tc.want)
			}
		}
	}
}

// TestGroupedInsertsRunAgainAlone queues, in one group commit, single
// submits that share multi-row INSERTs and one whose id is taken: the
// shared INSERT fails, the group runs again with a savepoint per
// operation, and only the duplicate fails.
func TestGroupedInsertsRunAgainAlone(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	taken := f.InsertNew("k", now)
	const n = 40 // more than one multi-row INSERT
	const dup = n / 2
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = f.Params("k", now)
	}
	ps[dup].ID = taken.ID
	together(t, st, n, func(i int) error {
		res, err := st.TaskInsert(f.Ctx(), ps[i])
		if i == dup {
			if err == nil {
				return fmt.Errorf("insert of a taken id %s: %+v; want an error", taken.ID, res)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if res.Task == nil || res.Task.ID != ps[i].ID || res.Existing {
			return fmt.Errorf("insert %d answered %+v; want task %s", i, res, ps[i].ID)
		}
		return nil
	})
	for i, p := range ps {
		if i == dup {
			continue
		}
		if got := f.Get(p.ID).Status; got != rota.StatusScheduled {
			t.Errorf("task %d: %s; want SCHEDULED", i, got)
		}
	}
}

// TestGroupedReportsPlan checks that the statements of a group of
// reports find each task by its run id (tasks_run), then write it by its
// id (the primary key), whatever their number of rows: from about a
// hundred VALUES rows SQLite once planned an automatic index instead,
// built by reading the whole tasks table at every group commit.
func TestGroupedReportsPlan(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	plans, err := st.CompletePlansForTest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) < 3 {
		t.Fatalf("plans: %v", plans)
	}
	for name, plan := range plans {
		probe, want := false, "SEARCH tasks USING PRIMARY KEY (id=?)"
		if name == "find" {
			want = "SEARCH tasks USING INDEX tasks_run (run_id=?)"
		}
		for _, d := range plan {
			if strings.Contains(d, "AUTOMATIC") || strings.HasPrefix(d, "SCAN tasks") {
				t.Errorf("%s: plan reads the tasks table: %q", name, plan)
			}
			probe = probe || strings.Contains(d, want)
		}
		if !probe {
			t.Errorf("%s: plan does not %s: %q", name, want, plan)
		}
	}
}

// TestCandidatePlan checks that the claim's candidate query is its
// seeks of tasks_ready (six, three for a PinnedOnly claim), each read in
// index order, and nothing sorted: an ORDER BY of the union had SQLite
// sort every seek's rows in a temporary b-tree at every claim.
func TestCandidatePlan(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	for _, pinnedOnly := range []bool{false, true} {
		plan, err := st.CandidatePlanForTest(context.Background(), pinnedOnly)
		if err != nil {
			t.Fatal(err)
		}
		seeks := 0
		for _, d := range plan {
			if strings.Contains(d, "TEMP B-TREE") || strings.HasPrefix(d, "SCAN tasks") {
				t.Errorf("pinned only %v: plan sorts or scans: %q", pinnedOnly, plan)
			}
			if strings.HasPrefix(d, "SEARCH tasks USING INDEX tasks_ready (kind=? AND level=? AND pinned=? AND run_at<?)") {
				seeks++
			}
		}
		if want := map[bool]int{false: 6, true: 3}[pinnedOnly]; seeks != want {
			t.Errorf("pinned only %v: %d seeks of tasks_ready; want %d: %q", pinnedOnly, seeks, want, plan)
		}
	}
}

// TestGroupedReportsPadding checks that a group of reports binds no more
// padding rows than the statement sizes promise: at least its reports,
// fewer than twice them, and under 32 rows of padding.
func TestGroupedReportsPadding(t *testing.T) {
	t.Parallel()
	for n := 2; n <= 256; n++ {
		rows := sqlitestore.CompleteRowsForTest(n)
		if rows < n || rows >= 2*n || rows-n >= 32 {
			t.Errorf("%d reports: a statement of %d rows", n, rows)
		}
	}
}

// BenchmarkEventAppend appends the events of a batch of 100 tasks (a
// submit, a start and an end each) in one call, as the server's event
// log does for a group of requests; -benchmem shows the allocations of
// the encoding and the binding.
func BenchmarkEventAppend(b *testing.B) {
	st := open(b).(*sqlitestore.Store)
	f := storetest.NewFixture(b, st)
	now := f.At(0)
	var evs []rota.Event
	for range 100 {
		id := f.NewTaskID(now)
		for _, s := range []rota.Status{rota.StatusScheduled, rota.StatusRunning, rota.StatusSuccess} {
			evs = append(evs, rota.Event{Time: now, Type: rota.EventTask, Kind: "bench", TaskID: id, RunID: f.NewRunID(), WorkerID: "w1", Status: s, Attempt: 1})
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := st.EventAppend(f.Ctx(), evs); err != nil {
			b.Fatal(err)
		}
	}
}
