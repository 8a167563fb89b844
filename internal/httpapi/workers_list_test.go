package httpapi

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/rotaapi"
)

// workerPage is the data of GET /api/workers.
type workerPage struct {
	Workers    []workerJSON `json:"workers"`
	NextCursor string       `json:"next_cursor"`
}

func (e *testEnv) workerPage(query string) workerPage {
	e.t.Helper()
	var out workerPage
	e.ok("GET", "/api/workers?"+query, nil, &out)
	return out
}

func workerNames(ws []workerJSON) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.WorkerID)
	}
	return out
}

func TestWorkerListPagedAndFiltered(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := setup(t, func(o *setupOptions) { o.dispatch.Clock = fake })
	for i := range 5 {
		e.claim(fmt.Sprintf("w%d", i), []string{"k" + fmt.Sprint(i%2)}, 1, 0)
	}
	var got []string
	cursor := ""
	for range 10 {
		p := e.workerPage("limit=2&cursor=" + url.QueryEscape(cursor))
		if len(p.Workers) > 2 {
			t.Fatalf("limit 2 gave %d workers", len(p.Workers))
		}
		got = append(got, workerNames(p.Workers)...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if fmt.Sprint(got) != "[w0 w1 w2 w3 w4]" {
		t.Fatalf("workers over pages: %v", got)
	}
	if p := e.workerPage("kind=k1"); fmt.Sprint(workerNames(p.Workers)) != "[w1 w3]" {
		t.Fatalf("kind=k1: %v", workerNames(p.Workers))
	}
	e.ok("POST", "/api/workers/w2/stop", nil, nil)
	e.ok("POST", "/api/workers/w4/deregister", nil, nil)
	if p := e.workerPage("status=stopped"); fmt.Sprint(workerNames(p.Workers)) != "[w2 w4]" {
		t.Fatalf("status=stopped: %v", workerNames(p.Workers))
	}
	fake.Advance(time.Hour)
	if p := e.workerPage("status=lost"); fmt.Sprint(workerNames(p.Workers)) != "[w0 w1 w3]" {
		t.Fatalf("status=lost an hour later: %v", workerNames(p.Workers))
	}
	if p := e.workerPage("status=active"); len(p.Workers) != 0 {
		t.Fatalf("status=active an hour later: %v", workerNames(p.Workers))
	}
	for _, tc := range []struct{ query, field string }{
		{"limit=1001", "limit"},
		{"limit=0", "limit"},
		{"status=gone", "status"},
		{"kind=bad%20kind", "kind"},
		{"cursor=%00", "cursor"},
		{"cursor=%ff", "cursor"},
	} {
		r := e.do("GET", "/api/workers?"+tc.query, nil)
		wantErr(t, r, rota.CodeInvalid)
		if r.field() != tc.field {
			t.Errorf("%s: field %q, want %q", tc.query, r.field(), tc.field)
		}
	}
	wantErr(t, e.do("GET", "/api/workers?color=red", nil), rota.CodeUnknownField)
	wantErr(t, e.do("POST", "/api/workers/nobody/deregister", nil), rota.CodeNotFound)
}

// TestWorkerDeregisterShowsStoppedAndPrunes: a worker that deregisters
// shows stopped (not lost, however long after); the leader's duty prunes
// workers gone longer than the retention, on the fake clock.
func TestWorkerDeregisterShowsStoppedAndPrunes(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := setup(t, func(o *setupOptions) {
		o.dispatch.Clock = fake
		o.dispatch.WorkerRetention = 2 * time.Hour
	})
	e.claim("graceful", []string{"k"}, 1, 0)
	e.claim("crashed", []string{"k"}, 1, 0)
	var w workerJSON
	e.ok("POST", "/api/workers/graceful/deregister", nil, &w)
	if w.Status != rota.WorkerStopped {
		t.Fatalf("deregister answered %+v, want stopped", w)
	}
	fake.Advance(time.Hour)
	if got := e.workerStatus("graceful"); got != rota.WorkerStopped {
		t.Fatalf("deregistered worker an hour later: %s, want stopped", got)
	}
	if got := e.workerStatus("crashed"); got != rota.WorkerLost {
		t.Fatalf("crashed worker an hour later: %s, want lost", got)
	}
	if n := e.disp.PruneWorkersOnce(t.Context()); n != 0 {
		t.Fatalf("pruned %d within the retention", n)
	}
	fake.Advance(time.Hour + time.Minute)
	e.claim("fresh", []string{"k"}, 1, 0)
	// A round of the leader's cleanup prunes the two gone past the
	// retention and keeps the fresh one. The leader's own loop may or may
	// not have run its round on the fake clock's advance (its timer may not
	// be set yet), so the round is also called directly: between them
	// exactly the two are pruned.
	pruned := e.disp.PruneWorkersOnce(t.Context())
	if pruned != 0 && pruned != 2 {
		t.Fatalf("pruned %d past the retention, want the two (or none if the leader's round took them)", pruned)
	}
	if got := fmt.Sprint(workerNames(e.workerPage("").Workers)); got != "[fresh]" {
		t.Fatalf("workers after the prune: %s, want [fresh]", got)
	}
	if n := e.disp.PruneWorkersOnce(t.Context()); n != 0 {
		t.Fatalf("a second round pruned %d", n)
	}
}

func TestWorkerListRuns(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := setup(t, func(o *setupOptions) { o.dispatch.Clock = fake })
	first := e.submit(map[string]any{"kind": "mail", "task": map[string]any{}})
	second := e.submit(map[string]any{"kind": "mail", "task": map[string]any{}})
	a := e.claimOne("w1", "mail", 0)
	fake.Advance(time.Second)
	b := e.claimOne("w1", "mail", 0)
	e.claim("idle", []string{"mail"}, 1, 0)
	if a.TaskID != first || b.TaskID != second {
		t.Fatalf("claimed %s then %s, want %s then %s", a.TaskID, b.TaskID, first, second)
	}
	p := e.workerPage("")
	if len(p.Workers) != 2 || p.Workers[0].WorkerID != "idle" || p.Workers[1].WorkerID != "w1" {
		t.Fatalf("workers: %v", workerNames(p.Workers))
	}
	if p.Workers[0].Runs != nil {
		t.Errorf("idle worker's runs: %+v, want none", p.Workers[0].Runs)
	}
	start := fake.Now().Unix()
	want := fmt.Sprint([]rotaapi.WorkerRun{
		{RunID: a.RunID, TaskID: first, Kind: "mail", StartedAt: start - 1},
		{RunID: b.RunID, TaskID: second, Kind: "mail", StartedAt: start},
	})
	if got := fmt.Sprint(p.Workers[1].Runs); got != want {
		t.Errorf("w1's runs: %s, want %s", got, want)
	}
	// Once it finishes one, only the other is listed.
	e.ok("POST", "/api/runs/"+a.RunID+"/succeed", map[string]any{"worker_id": "w1"}, nil)
	if got := e.workerPage("").Workers[1].Runs; len(got) != 1 || got[0].RunID != b.RunID {
		t.Errorf("w1's runs after one succeeded: %+v", got)
	}
}
