package schedule

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// TestFireAhead: a batch whose lead covers the time left is decided ahead;
// its runs are not claimable before their fire time, and the CANCEL_PREV
// stop waits for it too.
func TestFireAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(base)
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	disp, err := dispatch.New(dispatch.Config{Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine(EngineConfig{Store: st, Dispatcher: disp, Clock: clk, Logger: slog.New(slog.DiscardHandler), FireAhead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	eng.SetLeader(true)
	var ids rota.IDGenerator
	var first string
	for i := range 3 {
		s := rota.Schedule{ID: ids.New(base), Name: string(rune('a' + i)), Kind: "k", Priority: rota.PriorityMid,
			Payload: json.RawMessage(`{}`), CronExpr: "*/5 * * * * *", Timezone: "UTC", Enabled: true, MaxConcurrency: 1,
			ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapCancelPrev, FailureAction: rota.FailureRunNew,
			MisfirePolicy: rota.MisfireSkip, TimeoutSeconds: 60}
		if err := Arm(&s, nil, base); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: s, Now: base}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = s.ID
		}
	}
	claim := func() int {
		res, err := disp.Claim(ctx, dispatch.ClaimRequest{WorkerID: "w", Kinds: []string{"k"}, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Runs)
	}
	pass := func() {
		if _, err := eng.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass() // load
	clk.Set(base.Add(5 * time.Second))
	pass()
	if n := claim(); n != 3 {
		t.Fatalf("claimed %d runs at +5s, want 3", n)
	}
	// The next batch (3 schedules due at +10s) needs 1.5·100ms·3 + 5ms of
	// lead: at +9.6s it is decided ahead.
	eng.runMu.Lock()
	eng.perItem = float64(100 * time.Millisecond)
	eng.runMu.Unlock()
	clk.Set(base.Add(9600 * time.Millisecond))
	pass()
	res, err := st.ScheduleRuns(ctx, store.ScheduleRunsParams{ScheduleID: first})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || !res.Runs[0].FireTime.Equal(base.Add(10*time.Second)) {
		t.Fatalf("runs after the early pass: %+v", res.Runs)
	}
	if res.Runs[1].StopRequested {
		t.Fatal("CANCEL_PREV stopped the previous run before the fire time")
	}
	if n := claim(); n != 0 {
		t.Fatalf("%d runs claimable before their fire time", n)
	}
	clk.Set(base.Add(10 * time.Second))
	eng.posts.Wait() // the stops and wake-ups due at +10s
	if n := claim(); n != 3 {
		t.Fatalf("claimed %d runs at +10s, want 3", n)
	}
	res, _ = st.ScheduleRuns(ctx, store.ScheduleRunsParams{ScheduleID: first})
	if !res.Runs[1].StopRequested {
		t.Fatal("the previous run was not stopped at the fire time")
	}
}
