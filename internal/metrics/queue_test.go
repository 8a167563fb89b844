package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/metrics"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
)

type queueBundle struct {
	st   store.Store
	disp *dispatch.Dispatcher
	reg  *prometheus.Registry
}

// queueSetup wires the queue metrics as the server does: a registry of
// its own, both metric sets on it, dispatcher events into Observe. The
// kind "email" exists before the metrics are created.
func queueSetup(t *testing.T) *queueBundle {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Relaxed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.KindUpsert(ctx, store.KindUpsertParams{Name: "email"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	q, err := metrics.NewQueue(reg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Config{Store: st, Events: q.Observe, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &queueBundle{st: st, disp: disp, reg: reg}
}

// series gathers the registry into "name{label=value,...}" → value; a
// histogram gives its sample count.
func (b *queueBundle) series(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func want(t *testing.T, got map[string]float64, key string, v float64) {
	t.Helper()
	g, ok := got[key]
	if !ok {
		t.Errorf("series %s is missing", key)
		return
	}
	if g != v {
		t.Errorf("%s = %v, want %v", key, g, v)
	}
}

func TestQueueSeriesExistAtZeroFromTheStart(t *testing.T) {
	t.Parallel()
	b := queueSetup(t)
	got := b.series(t)
	for _, s := range rota.Statuses() {
		want(t, got, "rota_tasks{kind=email,status="+string(s)+"}", 0)
	}
	for _, s := range []string{"RUNNING", "SUCCESS", "FAILED", "TIMEOUT", "CANCELED"} {
		want(t, got, "rota_task_runs_total{kind=email,status="+s+"}", 0)
	}
	for _, s := range []string{"active", "lost", "stopped"} {
		want(t, got, "rota_workers{status="+s+"}", 0)
	}
	want(t, got, "rota_tasks_submitted_total{kind=email}", 0)
	want(t, got, "rota_claim_latency_seconds{kind=email}", 0)
	want(t, got, "rota_task_start_latency_seconds{kind=email}", 0)
	want(t, got, "rota_queue_oldest_waiting_seconds{kind=email}", 0)
	want(t, got, "rota_kind_paused{kind=email}", 0)
	// The schedule metrics share the registry without a clash.
	want(t, got, "rota_runs_total{status=SUCCESS}", 0)
}

func TestQueueSeriesMoveWhenATaskRuns(t *testing.T) {
	t.Parallel()
	b := queueSetup(t)
	ctx := context.Background()
	now := time.Now()
	res, err := b.disp.Submit(ctx, []store.TaskInsertParams{
		{ID: b.disp.NewID(), Kind: "email", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`), RunAt: now.Add(-2 * time.Second), MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now},
		{ID: b.disp.NewID(), Kind: "sms", Priority: rota.PriorityLow, Payload: json.RawMessage(`{}`), RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now},
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("submit: %v", err)
	}
	got := b.series(t)
	want(t, got, "rota_tasks{kind=email,status=SCHEDULED}", 1)
	want(t, got, "rota_tasks_submitted_total{kind=email}", 1)
	want(t, got, "rota_tasks_submitted_total{kind=sms}", 1) // a kind new since start
	want(t, got, "rota_task_runs_total{kind=sms,status=RUNNING}", 0)
	if g := got["rota_queue_oldest_waiting_seconds{kind=email}"]; g < 1 {
		t.Errorf("oldest waiting = %v, want ≥ 1 s", g)
	}

	claim, err := b.disp.Claim(ctx, dispatch.ClaimRequest{WorkerID: "w1", Kinds: []string{"email"}, Max: 1})
	if err != nil || len(claim.Runs) != 1 {
		t.Fatalf("claim: %+v, %v", claim, err)
	}
	got = b.series(t)
	want(t, got, "rota_tasks{kind=email,status=RUNNING}", 1)
	want(t, got, "rota_task_runs_total{kind=email,status=RUNNING}", 1)
	want(t, got, "rota_claim_latency_seconds{kind=email}", 1)
	want(t, got, "rota_task_start_latency_seconds{kind=email}", 1)
	want(t, got, "rota_workers{status=active}", 1)

	if _, err := b.disp.Complete(ctx, store.RunCompleteParams{RunID: claim.Runs[0].RunID, WorkerID: "w1", Success: true}); err != nil {
		t.Fatal(err)
	}
	got = b.series(t)
	want(t, got, "rota_tasks{kind=email,status=SUCCESS}", 1)
	want(t, got, "rota_tasks{kind=email,status=RUNNING}", 0)
	want(t, got, "rota_task_runs_total{kind=email,status=SUCCESS}", 1)

	// The claim waited about 2 s: the latency lands in the 2.5 s bucket.
	mfs, _ := b.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "rota_claim_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != "email" {
				continue
			}
			if s := m.GetHistogram().GetSampleSum(); s < 1.5 || s > 30 {
				t.Errorf("claim latency sum = %v s, want about 2", s)
			}
		}
	}

	// Served in the text format by promhttp.
	srv := httptest.NewServer(promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range []string{
		`rota_tasks{kind="email",status="SUCCESS"} 1`,
		`rota_task_runs_total{kind="email",status="SUCCESS"} 1`,
		`rota_workers{status="active"} 1`,
		`rota_claim_latency_seconds_count{kind="email"} 1`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func TestQueueStoreFailureIsReported(t *testing.T) {
	t.Parallel()
	b := queueSetup(t)
	b.st.Close()
	if _, err := b.reg.Gather(); err == nil {
		t.Fatal("gather over a closed store: no error")
	}
}

// TestDashboardUsesExistingSeries: every metric docs/grafana-dashboard.json
// queries is registered, with a series at start-up.
func TestDashboardUsesExistingSeries(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	b := queueSetup(t)
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) > 0 {
			have[mf.GetName()] = true
		}
	}
	names := regexp.MustCompile(`rota_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range names.FindAllString(tg.Expr, -1) {
				n++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !have[base] {
					t.Errorf("the dashboard queries %s: no such series at start-up", name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d metric references in the dashboard", n)
	}
}

// slowStatsStore is a store whose Stats take delay and count waiting
// more tasks than it holds (a deep queue's count).
type slowStatsStore struct {
	store.Store
	delay   time.Duration
	waiting int
	calls   atomic.Int32
}

func (s *slowStatsStore) Stats(ctx context.Context, now time.Time) (store.Stats, error) {
	s.calls.Add(1)
	time.Sleep(s.delay)
	stats, err := s.Store.Stats(ctx, now)
	for _, k := range stats.Kinds {
		k.Counts[rota.StatusWaiting] += s.waiting
	}
	return stats, err
}

// TestQueueReusesASlowStatsRead: a slow Stats read of a deep queue serves
// the next scrapes for a while; quick reads, and slow reads of a shallow
// queue, are made at every scrape.
func TestQueueReusesASlowStatsRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		delay   time.Duration
		waiting int
		reads   int32
	}{{0, 1_000_000, 3}, {150 * time.Millisecond, 100, 3}, {150 * time.Millisecond, 1_000_000, 1}} {
		b := queueSetup(t)
		slow := &slowStatsStore{Store: b.st, delay: c.delay, waiting: c.waiting}
		reg := prometheus.NewRegistry()
		if _, err := metrics.NewQueue(reg, slow, nil); err != nil {
			t.Fatal(err)
		}
		slow.calls.Store(0)
		for range 3 {
			if _, err := reg.Gather(); err != nil {
				t.Fatal(err)
			}
		}
		if got := slow.calls.Load(); got != c.reads {
			t.Errorf("Stats taking %v, %d waiting: %d reads for 3 scrapes, want %d", c.delay, c.waiting, got, c.reads)
		}
	}
}
