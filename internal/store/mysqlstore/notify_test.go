package mysqlstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/storetest"
)

// subscribe runs st's Subscribe until the test ends and returns its
// notifications, each with the instant it arrived.
func subscribe(t *testing.T, st *mysqlstore.Store) <-chan heard {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan heard, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Subscribe(ctx, func(n store.Notification) {
			select {
			case ch <- heard{n, time.Now()}:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

type heard struct {
	store.Notification
	at time.Time
}

// waitFor returns the first notification of kind within d.
func waitFor(ch <-chan heard, kind string, d time.Duration) (heard, bool) {
	timeout := time.After(d)
	for {
		select {
		case h := <-ch:
			if h.Kind == kind {
				return h, true
			}
		case <-timeout:
			return heard{}, false
		}
	}
}

func TestSubscribeHearsOtherNodeNotItself(t *testing.T) {
	t.Parallel()
	db := mysqltest.NewDatabase(t)
	a, b := openDB(t, db, "node-a", nil), openDB(t, db, "node-b", nil)
	if !a.SupportsNotify() {
		t.Fatal("SupportsNotify = false")
	}
	notes := subscribe(t, a)
	time.Sleep(100 * time.Millisecond) // the poller has read the sequence's end
	fa, fb := storetest.NewFixture(t, a), storetest.NewFixture(t, b)
	fa.InsertNew("own", fa.At(0))
	fb.InsertNew("now", fb.At(0))
	n, ok := waitFor(notes, "now", 2*time.Second)
	if !ok {
		t.Fatal("no notification within 2s of an insert by another store")
	}
	if !n.RunAt.IsZero() {
		t.Fatalf("notification of a due task has RunAt %v, want zero (now)", n.RunAt)
	}
	p := fb.Params("later", fb.At(0))
	p.RunAt = fb.At(90*time.Second + 250*time.Millisecond)
	fb.Insert(p)
	if n, ok = waitFor(notes, "later", 2*time.Second); !ok || !n.RunAt.Equal(p.RunAt) {
		t.Fatalf("delayed insert: heard %v (%v), want RunAt %v", n.RunAt, ok, p.RunAt)
	}
	// The own insert came first: had it been echoed, it would be here.
	for len(notes) > 0 {
		if h := <-notes; h.Kind == "own" {
			t.Fatal("node-a heard its own insert")
		}
	}
	// A retry is heard by its own node too: its dispatcher cannot know it.
	c := fa.ClaimOne("w1", fa.At(time.Second), "own")
	fa.Fail("w1", c.RunID, fa.At(2*time.Second), func(int) time.Duration { return 5 * time.Second })
	if n, ok = waitFor(notes, "own", 2*time.Second); !ok || !n.RunAt.Equal(fa.At(7*time.Second)) {
		t.Fatalf("own retry: heard %v (%v), want RunAt %v", n.RunAt, ok, fa.At(7*time.Second))
	}
	// An event appended by b: a hears that the event log grew.
	if _, err := b.EventAppend(t.Context(), []rota.Event{{Type: rota.EventTask, Time: fb.At(0), TaskID: "x"}}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(2 * time.Second)
	for {
		select {
		case h := <-notes:
			if h.Events {
				return
			}
		case <-timeout:
			t.Fatal("no events notification within 2s of an append by another store")
		}
	}
}

// TestWakeUpLatency measures the cross-node wake-up: node b inserts a task
// due now, node a hears of it through the change sequence. It reports p50
// and p99 over 200 inserts, from the insert's commit (the path this store
// adds) and from the call (the commit included), and holds the p99 from
// the commit to the bound the PostgreSQL store meets (200 ms).
func TestWakeUpLatency(t *testing.T) {
	t.Parallel()
	db := mysqltest.NewDatabase(t)
	a, b := openDB(t, db, "node-a", nil), openDB(t, db, "node-b", nil)
	notes := subscribe(t, a)
	time.Sleep(100 * time.Millisecond)
	fb := storetest.NewFixture(t, b)
	const n = 200
	fromCommit, fromCall := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		fb.InsertNew("wake", fb.At(time.Duration(i)*time.Millisecond))
		committed := time.Now()
		h, ok := waitFor(notes, "wake", 2*time.Second)
		if !ok {
			t.Fatalf("insert %d: no notification within 2s", i)
		}
		fromCommit, fromCall = append(fromCommit, max(h.at.Sub(committed), 0)), append(fromCall, h.at.Sub(start))
		time.Sleep(time.Duration(i%7) * time.Millisecond) // spread over the poll interval
	}
	pct := func(d []time.Duration) (p50, p99 time.Duration) {
		slices.Sort(d)
		return d[n/2].Round(100 * time.Microsecond), d[n*99/100].Round(100 * time.Microsecond)
	}
	c50, c99 := pct(fromCommit)
	s50, s99 := pct(fromCall)
	t.Logf("cross-node wake-up over %d inserts (poll interval 20 ms): from the commit p50 %v, p99 %v; from the call p50 %v, p99 %v",
		n, c50, c99, s50, s99)
	if c99 > 200*time.Millisecond {
		t.Errorf("p99 wake-up after the commit %v, want ≤ 200ms", c99)
	}
}
