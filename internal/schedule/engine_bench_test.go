package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// latencyStore records, for every run a fire inserted, the time from its
// fire time to the moment it became claimable: when the store call that
// created it returned, or its fire time if that was earlier (a run decided
// ahead, stored with RunAt = its fire time). It also records how early the
// runs decided ahead were created.
type latencyStore struct {
	store.ScheduleStore
	mu      sync.Mutex
	samples []time.Duration
	ahead   []time.Duration
}

func (l *latencyStore) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	res, err := l.ScheduleStore.ScheduleFire(ctx, ps)
	done := time.Now()
	l.mu.Lock()
	for i := range res {
		for _, r := range res[i].Inserted {
			if r.Status == rota.StatusScheduled {
				late := done.Sub(r.FireTime)
				if late < 0 {
					l.ahead = append(l.ahead, -late)
					late = 0
				}
				l.samples = append(l.samples, late)
			}
		}
	}
	l.mu.Unlock()
	return res, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEngine10k fires 10,000 schedules on the real clock over a real
// SQLite file (full durability) and over PostgreSQL for 5 seconds per iteration (run it with
// -benchtime=1x) and reports the fire lateness — from the fire time to the
// moment the run is claimable in the store — at p50, p99 and max, the runs
// fired per second, the share of the runs decided ahead of their fire time
// (EngineConfig.FireAhead) and the share of one CPU the whole process used
// (engine and SQLite writer; no workers run).
func BenchmarkEngine10k(b *testing.B) {
	mixes := []struct{ perSecond, perMinute int }{
		{1000, 9000}, // most schedules every minute, spread over the seconds
		{5000, 5000}, // half and half
	}
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", openSQLite},
		{"postgres", openPostgres},
	}
	for _, st := range stores {
		for _, mix := range mixes {
			b.Run(fmt.Sprintf("store=%s/every-second=%d/every-minute=%d", st.name, mix.perSecond, mix.perMinute), func(b *testing.B) {
				benchEngine(b, st.open(b), mix.perSecond, mix.perMinute, 5*time.Second)
			})
		}
	}
}

// openSQLite opens a store in a fresh file, with full durability.
func openSQLite(b *testing.B) store.Store {
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(b.TempDir(), "rota.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// openPostgres opens a store in a fresh schema of ROTA_TEST_POSTGRES
// (default: the local server), dropped afterwards.
func openPostgres(b *testing.B) store.Store {
	url := os.Getenv("ROTA_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	schema := fmt.Sprintf("rota_bench_%d", time.Now().UnixNano())
	st, err := pgstore.New(ctx, pgstore.Config{URL: url, Schema: schema, NodeID: "bench"})
	if err != nil {
		b.Fatalf("PostgreSQL at ROTA_TEST_POSTGRES (default local): %v", err)
	}
	b.Cleanup(func() {
		st.Close()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			b.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return st
}

func benchEngine(b *testing.B, st store.Store, perSecond, perMinute int, dur time.Duration) {
	ctx := context.Background()
	ls := &latencyStore{ScheduleStore: st}
	ids := &rota.IDGenerator{}
	// The schedules start firing after the set-up (inserting them takes a
	// while): their high-water mark is that moment, not the insert time.
	now := time.Now().UTC().Add(30 * time.Second).Truncate(time.Second)
	// Insert the schedules from many goroutines: group commit.
	var wg sync.WaitGroup
	work := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				expr := "* * * * * *"
				if i >= perSecond {
					expr = fmt.Sprintf("%d * * * * *", i%60)
				}
				s := rota.Schedule{ID: ids.New(now), Name: fmt.Sprintf("s%05d", i), Kind: fmt.Sprintf("k%d", i%10),
					Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`), CronExpr: expr, Timezone: "UTC", Enabled: true,
					MaxConcurrency: 1000, ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapParallel,
					FailureAction: rota.FailureRunNew, MisfirePolicy: rota.MisfireSkip, TimeoutSeconds: 60}
				if err := schedule.Arm(&s, nil, now); err != nil {
					b.Error(err)
					return
				}
				if _, err := st.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: s, Now: now}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for i := range perSecond + perMinute {
		work <- i
	}
	close(work)
	wg.Wait()
	disp, err := dispatch.New(dispatch.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := schedule.NewEngine(schedule.EngineConfig{Store: ls, Dispatcher: disp, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	eng.SetLeader(true)
	if _, err := eng.RunOnce(ctx); err != nil { // the initial load, outside the measure
		b.Fatal(err)
	}
	if wait := time.Until(now); wait > 0 {
		time.Sleep(wait)
	} else {
		b.Logf("set-up took %v longer than planned: a backlog is measured", -wait)
	}
	ls.mu.Lock()
	ls.samples, ls.ahead = ls.samples[:0], ls.ahead[:0]
	ls.mu.Unlock()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		time.Sleep(dur)
	}
	eng.Stop()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	b.StopTimer()
	ls.mu.Lock()
	s := slices.Clone(ls.samples)
	ahead := len(ls.ahead)
	ls.mu.Unlock()
	if len(s) == 0 {
		b.Fatal("nothing fired")
	}
	slices.Sort(s)
	pct := func(p float64) float64 { return float64(s[int(p*float64(len(s)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(len(s))/wall.Seconds(), "runs/s")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(100*float64(ahead)/float64(len(s)), "ahead-%")
}
