package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

// TestSchedulingFiresOnLeader wires the engine as the server does and
// checks that a schedule fires once this node leads.
func TestSchedulingFiresOnLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), NodeID: "n1", LeaderLease: 5 * time.Second}
	cfg.Clock = clock.Real{}
	s, err := compose(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := s.initSchedules()
	if err != nil || sch == nil {
		t.Fatalf("initSchedules: %v, %v", sch, err)
	}
	sc := rota.Schedule{ID: s.disp.NewID(), Name: "every-second", Kind: "tick", Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{}`), CronExpr: "* * * * * *", Timezone: "UTC", Enabled: true, MaxConcurrency: 1,
		ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow, FailureAction: rota.FailureRunNew,
		MisfirePolicy: rota.MisfireSkip, TimeoutSeconds: 10}
	now := cfg.Clock.Now()
	if err := schedule.Arm(&sc, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ScheduleInsert(ctx, store.ScheduleInsertParams{Schedule: sc, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sch.start(ctx); err != nil {
		t.Fatal(err)
	}
	// s.Start elected this node: the hook told both engines they lead.
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := st.ScheduleRuns(ctx, store.ScheduleRunsParams{ScheduleID: sc.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedule never fired on the leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sch.stop()
	sch.stop() // idempotent
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
