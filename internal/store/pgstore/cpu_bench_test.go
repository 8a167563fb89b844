package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
)

// BenchmarkPostgresCPUPerTask measures what a task asks of PostgreSQL's
// CPU on the path of an end-to-end run (bench/peers' e2e case), phase by
// phase, from the CPU time (/proc/<pid>/stat, utime + stime) of the
// backends serving the store's connections (found by their
// application_name): tasks inserted in batches of 500, claimed 100 at a
// time by one worker, completed by 100 concurrent reports (the
// completers group them), and the events of a task (5, as the dispatcher
// emits them: submitted, the run and the task at the claim, the run and
// the task at the end) appended in chunks of 100. Each b.N is one round
// of 500 tasks. It reports µs of PostgreSQL CPU per task for each phase
// and in all: counts, not rates, so that it can be compared across a
// change on a loaded machine (run the two sides alternately, -count 3).
// It needs the PostgreSQL server on this machine (its /proc).
func BenchmarkPostgresCPUPerTask(b *testing.B) {
	ctx := context.Background()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	app := "rota-cpu-bench-" + hex.EncodeToString(rb[:])
	sep := "?"
	if strings.Contains(testURL(), "?") {
		sep = "&"
	}
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL() + sep + "application_name=" + app, Schema: newSchema(b), NodeID: "node-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	admin, err := pgx.Connect(ctx, testURL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	// cpu is the CPU seconds each backend of the store has run so far, by
	// pid. A phase is charged with what each backend present at its end
	// ran during it (all of it for a backend that started meanwhile: a new
	// pool connection, the analyzer's).
	cpu := func() map[int]float64 {
		rows, _ := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		return procCPU(b, pids)
	}
	const round, claimMax, chunk = 500, 100, 100
	var ids, runIDs rota.IDGenerator
	phases := []string{"insert", "claim", "complete", "events"}
	spent := make([]float64, len(phases))
	measure := func(i int, fn func()) {
		before := cpu()
		fn()
		for pid, secs := range cpu() {
			spent[i] += secs - before[pid]
		}
	}
	now := time.Now()
	for n := range b.N + 1 {
		if n == 1 {
			// The first round warmed the connections up (their start,
			// catalog caches, plans): it is not counted.
			clear(spent)
			b.ResetTimer()
		}
		ps := make([]store.TaskInsertParams, round)
		for i := range ps {
			ps[i] = store.TaskInsertParams{ID: ids.New(now), Kind: "cpu", Priority: rota.PriorityMid, Payload: []byte(`{"n":1}`), RunAt: now,
				MaxRetries: 3, Workers: 1, HeartbeatTimeoutSeconds: 30, Now: now}
		}
		measure(0, func() {
			if _, err := st.TaskInsertMany(ctx, ps); err != nil {
				b.Fatal(err)
			}
		})
		var runs []rota.ClaimedRun
		measure(1, func() {
			for len(runs) < round {
				res, err := st.TaskClaim(ctx, store.TaskClaimParams{WorkerID: "w1", WorkerAddress: "w1:7070",
					Kinds: []string{"cpu"}, Max: claimMax, Now: now, NewRunID: func() string { return runIDs.New(now) }})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Runs) == 0 {
					b.Fatalf("claim got nothing after %d of %d", len(runs), round)
				}
				runs = append(runs, res.Runs...)
			}
		})
		measure(2, func() {
			for i := 0; i < len(runs); i += claimMax {
				var wg sync.WaitGroup
				for _, r := range runs[i:min(i+claimMax, len(runs))] {
					wg.Go(func() {
						if _, err := st.RunComplete(ctx, store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1",
							Success: true, Result: []byte(`null`), Now: now}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
		measure(3, func() {
			evs := taskEvents(runs, now)
			for i := 0; i < len(evs); i += chunk {
				if _, err := st.EventAppend(ctx, evs[i:min(i+chunk, len(evs))]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.StopTimer()
	total := 0.0
	for i, name := range phases {
		b.ReportMetric(spent[i]*1e6/float64(b.N*round), "pg-µs/task-"+name)
		total += spent[i]
	}
	b.ReportMetric(total*1e6/float64(b.N*round), "pg-µs/task")
}

// taskEvents are the events the dispatcher emits for the tasks of runs
// from their submit to their success.
func taskEvents(runs []rota.ClaimedRun, now time.Time) []rota.Event {
	var evs []rota.Event
	for _, r := range runs {
		evs = append(evs,
			rota.Event{Type: rota.EventTask, Kind: r.Kind, TaskID: r.TaskID, Status: rota.StatusScheduled, Time: now, RunAt: r.RunAt},
			rota.Event{Type: rota.EventRun, Kind: r.Kind, TaskID: r.TaskID, RunID: r.RunID, WorkerID: "w1",
				Status: rota.StatusRunning, Attempt: r.Attempt, Time: now, RunAt: r.RunAt},
			rota.Event{Type: rota.EventTask, Kind: r.Kind, TaskID: r.TaskID, Status: rota.StatusRunning,
				Attempt: r.Attempt, Time: now, RunAt: r.RunAt},
			rota.Event{Type: rota.EventRun, Kind: r.Kind, TaskID: r.TaskID, RunID: r.RunID, WorkerID: "w1",
				Status: rota.StatusSuccess, Attempt: r.Attempt, Time: now},
			rota.Event{Type: rota.EventTask, Kind: r.Kind, TaskID: r.TaskID, Status: rota.StatusSuccess,
				Attempt: r.Attempt, Time: now, RunAt: r.RunAt, Result: []byte(`null`)})
	}
	return evs
}

// procCPU is the CPU seconds each of the processes pids has run so far
// (the first field of /proc/<pid>/schedstat, in ns: finer than
// /proc/<pid>/stat's ticks); a process gone is left out.
func procCPU(b *testing.B, pids []int) map[int]float64 {
	out := make(map[int]float64, len(pids))
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue // gone
		}
		f := strings.Fields(string(data))
		ns, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			b.Fatalf("read /proc/%d/schedstat: %v", pid, err)
		}
		out[pid] = ns / 1e9
	}
	return out
}
