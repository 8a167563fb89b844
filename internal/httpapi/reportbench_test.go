package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// instantReports is a store whose reports succeed at once with a canned
// task (the brief answer of a success), so that a benchmark counts what
// the API and the dispatcher spend on a report, not the store.
type instantReports struct {
	store.Store
	brief []bool // the Brief of each report seen
}

func (s *instantReports) answer(p store.RunCompleteParams) *rota.Task {
	s.brief = append(s.brief[:0], p.Brief)
	return &rota.Task{ID: "0123456789abcdef0123456789abcdef", Kind: "k", Status: rota.StatusSuccess, Attempt: 1,
		Runs: []rota.Run{{ID: p.RunID, WorkerID: p.WorkerID, Status: rota.StatusSuccess, Attempt: 1}}}
}

func (s *instantReports) RunComplete(_ context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	return s.answer(p), nil
}

func (s *instantReports) RunCompleteMany(_ context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error) {
	tasks := make([]*rota.Task, len(ps))
	for i, p := range ps {
		tasks[i] = s.answer(p)
	}
	return tasks, make([]error, len(ps))
}

// benchReports serves requests of body(i) on path(i) (64 of them, made
// beforehand) to the API's handler (no network), and reports allocs per
// report (the request and the recorder included).
func benchReports(b *testing.B, reportsPerRequest int, path func(i int) string, body func(i int) string) {
	fake := &instantReports{}
	e := setup(b, func(o *setupOptions) {
		o.wrapStore = func(s store.Store) store.Store { fake.Store = s; return fake }
	})
	h := e.api.Handler()
	paths, bodies := make([]string, 64), make([]string, 64)
	for i := range paths {
		paths[i], bodies[i] = path(i), body(i)
	}
	serve := func(i int) {
		r := httptest.NewRequest(http.MethodPost, paths[i%len(paths)], strings.NewReader(bodies[i%len(bodies)]))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("HTTP %d: %s", w.Code, w.Body)
		}
	}
	serve(0)
	if len(fake.brief) == 0 || !fake.brief[0] {
		b.Fatalf("the store was not asked for a brief answer")
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		serve(i)
	}
	b.ReportMetric(float64(testing.AllocsPerRun(10, func() { i++; serve(i) }))/float64(reportsPerRequest), "allocs/report")
}

// BenchmarkReportSucceed is POST /api/runs/{run_id}/succeed: a report of
// its own, as a worker without batch reports sends it.
func BenchmarkReportSucceed(b *testing.B) {
	benchReports(b, 1,
		func(i int) string { return fmt.Sprintf("/api/runs/%032x/succeed", i) },
		func(int) string { return `{"worker_id":"w1"}` })
}

// BenchmarkReportsBatch is POST /api/runs/reports with 100 successes.
func BenchmarkReportsBatch(b *testing.B) {
	benchReports(b, 100,
		func(int) string { return "/api/runs/reports" },
		func(i int) string {
			var sb strings.Builder
			sb.WriteString(`{"worker_id":"w1","reports":[`)
			for j := range 100 {
				if j > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"run_id":"%016x%016x","outcome":"succeed"}`, i, j)
			}
			sb.WriteString(`]}`)
			return sb.String()
		})
}
