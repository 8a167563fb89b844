package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// A notification from another node may be about a pinned task: it wakes
// the PinnedOnly claims of the kind as well as some ordinary ones.
func TestRemoteNotificationWakesPinnedOnlyClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	// More ordinary waiters than a notification wakes, ahead of it.
	var workers []<-chan store.TaskClaimResult
	for i := range remoteWake + 1 {
		workers = append(workers, f.claimAsync(fmt.Sprintf("w%d", i), "k", 30*time.Second))
	}
	pinnedOnly := f.claimAsyncReq(ClaimRequest{WorkerID: "exec", Kinds: []string{"k"}, Max: 1, Wait: 30 * time.Second, PinnedOnly: true})
	// Written by "another node": straight into the store, no local wake-up.
	now := f.clock.Now()
	res, err := f.st.TaskInsert(context.Background(), store.TaskInsertParams{
		ID: f.ids.New(now), Kind: "k", Priority: rota.PriorityMid, Payload: json.RawMessage(`{}`),
		RunAt: now, MaxRetries: 3, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now, WorkerIDs: []string{"exec"},
	})
	if err != nil {
		t.Fatal(err)
	}
	noResult(t, "the PinnedOnly claim before the notification", pinnedOnly)
	f.d.remote(store.Notification{Kind: "k"})
	if got := receive(t, pinnedOnly); len(got.Runs) != 1 || got.Runs[0].TaskID != res.Task.ID {
		t.Fatalf("PinnedOnly claim = %+v, want task %s", got, res.Task.ID)
	}
	for _, w := range workers {
		noResult(t, "a worker's claim", w)
	}
}

// notifyingStore sends its notifications on Subscribe, then holds the
// subscription until ctx ends.
type notifyingStore struct {
	notify bool
	notes  []store.Notification
}

func (s *notifyingStore) SupportsNotify() bool { return s.notify }

func (s *notifyingStore) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	for _, n := range s.notes {
		fn(n)
	}
	<-ctx.Done()
	return nil
}

func TestListener(t *testing.T) {
	t.Parallel()
	got := make(chan store.Notification, 2)
	st := &notifyingStore{notify: true, notes: []store.Notification{{Kind: "a"}, {Kind: "b"}}}
	l, err := NewListener(ListenerConfig{Store: st, Handle: func(n store.Notification) { got <- n }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		select {
		case n := <-got:
			if n.Kind != want {
				t.Fatalf("notification %q, want %q", n.Kind, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %q never handled", want)
		}
	}
	l.Stop() // ends the subscription: goleak checks nothing is left
	l.Stop()

	// A store that cannot notify: nothing to run.
	quiet, err := NewListener(ListenerConfig{Store: &notifyingStore{}, Handle: func(store.Notification) { t.Error("handled") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := quiet.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	quiet.Stop()
	if err := quiet.runOnce(canceled()); err != nil {
		t.Fatalf("runOnce after its context ended: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
