package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/rotaapi"
)

// TestKindsShowNoWorkerSince: a kind whose ready task has waited
// --no-worker-after with no worker shows no_worker_since in GET /api/kinds
// and /api/kinds/{kind}, until a worker of the kind claims.
func TestKindsShowNoWorkerSince(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := setup(t, func(o *setupOptions) { o.dispatch.Clock = fake })
	t0 := fake.Now()
	e.submit(map[string]any{"kind": "lonely", "task": 1})
	e.submit(map[string]any{"kind": "served", "task": 1})
	e.claim("w-served", []string{"served"}, 1, 0)
	since := func() (list, one int64) {
		t.Helper()
		if err := e.disp.NoWorkerOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		var kinds rotaapi.KindList
		e.ok("GET", "/api/kinds", nil, &kinds)
		for _, k := range kinds.Kinds {
			switch k.Kind {
			case "lonely":
				list = k.NoWorkerSince
			case "served":
				if k.NoWorkerSince != 0 {
					t.Fatalf("kind served (its task claimed) shows no_worker_since %d", k.NoWorkerSince)
				}
			}
		}
		var k rotaapi.Kind
		e.ok("GET", "/api/kinds/lonely", nil, &k)
		return list, k.NoWorkerSince
	}
	if l, o := since(); l != 0 || o != 0 {
		t.Fatalf("no_worker_since at once: %d, %d; want none", l, o)
	}
	fake.Advance(30 * time.Second)
	if l, o := since(); l != t0.Unix() || o != t0.Unix() {
		t.Fatalf("no_worker_since after 30s: list %d, kind %d; want %d", l, o, t0.Unix())
	}
	e.claim("w-lonely", []string{"lonely"}, 1, 0)
	if l, o := since(); l != 0 || o != 0 {
		t.Fatalf("no_worker_since after a worker claimed: %d, %d; want none", l, o)
	}
}
