package storecost_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota/internal/store/storecost"
)

func TestCounterSeparatesAsyncWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c storecost.Counter
	c.Add(ctx, storecost.Counts{Statements: 3, RoundTrips: 1, Commits: 1})
	before := c.Snapshot()
	c.Add(ctx, storecost.Counts{Statements: 2, RoundTrips: 2})
	c.Add(storecost.Async(ctx), storecost.Counts{Statements: 1, RoundTrips: 1, Prepares: 1})
	got := c.Snapshot().Sub(before)
	want := storecost.Snapshot{
		Caller: storecost.Counts{Statements: 2, RoundTrips: 2},
		Async:  storecost.Counts{Statements: 1, RoundTrips: 1, Prepares: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("snapshot delta (-want +got):\n%s", d)
	}
	if d := cmp.Diff(storecost.Counts{Statements: 3, RoundTrips: 3, Prepares: 1}, got.Total()); d != "" {
		t.Errorf("total (-want +got):\n%s", d)
	}
	if storecost.IsAsync(ctx) || !storecost.IsAsync(storecost.Async(ctx)) {
		t.Error("IsAsync does not tell Async contexts apart")
	}
}

func TestNilCounterCountsNothing(t *testing.T) {
	t.Parallel()
	var c *storecost.Counter
	c.Add(context.Background(), storecost.Counts{Statements: 1})
	if got := c.Snapshot(); got != (storecost.Snapshot{}) {
		t.Errorf("nil counter snapshot = %+v, want zero", got)
	}
}

func TestTables(t *testing.T) {
	t.Parallel()
	before := map[string]storecost.Rows{"tasks": {Inserted: 1, Updated: 2}, "kinds": {Updated: 5, HotUpdated: 5}}
	after := map[string]storecost.Rows{"tasks": {Inserted: 4, Updated: 8, HotUpdated: 1}, "kinds": {Updated: 5, HotUpdated: 5},
		"runs": {Inserted: 3, Deleted: 1}}
	d := storecost.SubTables(after, before)
	want := map[string]storecost.Rows{"tasks": {Inserted: 3, Updated: 6, HotUpdated: 1}, "runs": {Inserted: 3, Deleted: 1}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("SubTables (-want +got):\n%s", diff)
	}
	sum := storecost.SumTables(d)
	if sum != (storecost.Rows{Inserted: 6, Updated: 6, HotUpdated: 1, Deleted: 1}) || sum.Versions() != 13 {
		t.Errorf("SumTables = %+v (versions %d), want 6 ins, 6 upd, 1 hot, 1 del (13 versions)", sum, sum.Versions())
	}
}
