package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func TestCleanupDeletesAuditRecordsPastRetention(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.AuditRetention = 90 * 24 * time.Hour })
	ctx := context.Background()
	start := f.clock.Now()
	for i, age := range []time.Duration{100 * 24 * time.Hour, 91 * 24 * time.Hour, 89 * 24 * time.Hour, time.Hour} {
		at := start.Add(-age)
		if err := f.st.AuditAppend(ctx, rota.AuditRecord{ID: f.ids.New(at), At: at, Actor: "a", Role: rota.RoleAdmin,
			Action: "kind.update", Target: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	f.d.CleanupOnce(ctx)
	res, err := f.st.AuditList(ctx, store.AuditListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range res.Records {
		targets = append(targets, r.Target)
	}
	if len(targets) != 2 || targets[0] != "d" || targets[1] != "c" {
		t.Fatalf("audit records left: %v, want [d c] (younger than 90 days)", targets)
	}
}

func TestCleanupDeletesEventsPastRetention(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.EventRetention = 24 * time.Hour })
	ctx := context.Background()
	start := f.clock.Now()
	var evs []rota.Event
	for i, age := range []time.Duration{48 * time.Hour, 25 * time.Hour, 23 * time.Hour, time.Minute} {
		evs = append(evs, rota.Event{Time: start.Add(-age), Type: rota.EventTask, TaskID: string(rune('a' + i))})
	}
	last, err := f.st.EventAppend(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	f.d.CleanupOnce(ctx)
	left, err := f.st.EventList(ctx, store.EventListParams{After: last - 4, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].TaskID != "c" || left[1].TaskID != "d" {
		t.Fatalf("events left: %v, want c and d (younger than 24 h)", left)
	}
}
