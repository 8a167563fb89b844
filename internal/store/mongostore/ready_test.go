package mongostore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
)

func openReady(t *testing.T, u string) *Store {
	t.Helper()
	s, err := New(t.Context(), Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func readyCount(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.ready.CountDocuments(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func claimOne(t *testing.T, s *Store, now time.Time) []rota.ClaimedRun {
	t.Helper()
	var ids rota.IDGenerator
	res, err := s.TaskClaim(t.Context(), store.TaskClaimParams{WorkerID: "w", Kinds: []string{"k"}, Max: 4, Now: now,
		NewRunID: func() string { return ids.New(now) }})
	if err != nil {
		t.Fatal(err)
	}
	return res.Runs
}

// TestReadyEntries: a claimable task has one entry, a claimed one none;
// entries a crash or a lost write left (a task gone, an older version)
// are deleted by the claim that picks them; and a database whose tasks
// have no entries (written before the ready collection) gets them at
// start.
func TestReadyEntries(t *testing.T) {
	u := mongotest.DB(t)
	s := openReady(t, u)
	t.Cleanup(func() { _ = s.Drop(context.Background()) })
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids rota.IDGenerator
	tid := ids.New(now)
	if _, err := s.TaskInsert(ctx, store.TaskInsertParams{ID: tid, Kind: "k", Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{}`), RunAt: now, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now}); err != nil {
		t.Fatal(err)
	}
	if n := readyCount(t, s); n != 1 {
		t.Fatalf("%d ready entries after a submit, want 1", n)
	}
	// Leftovers: the entry of a version the task passed, and one of a
	// task that is gone (older than staleTicket), both due before it.
	old := readyDoc{ID: tid + "/0/lost", Task: tid, V: 0, Kind: "k", Level: 0, Workers: []string{}, Holds: []string{},
		RunAt: store.Millis(now) - 1000, Made: time.Now().UnixMilli()}
	gone := readyDoc{ID: "gone/1/x", Task: "gone", V: 1, Kind: "k", Level: 0, Workers: []string{}, Holds: []string{},
		RunAt: store.Millis(now) - 1000, Made: time.Now().Add(-time.Minute).UnixMilli()}
	young := gone
	young.ID, young.Task, young.Made = "young/1/x", "young", time.Now().UnixMilli()
	for _, e := range []readyDoc{old, gone, young} {
		if _, err := s.ready.InsertOne(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.tasks.FindOneAndUpdate(ctx, id(tid), bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	runs := claimOne(t, s, now)
	if len(runs) != 1 || runs[0].TaskID != tid {
		t.Fatalf("claim: %+v, want the run of %s", runs, tid)
	}
	var left []readyDoc
	cur, err := s.ready.Find(ctx, bson.D{})
	if err != nil || cur.All(ctx, &left) != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != young.ID {
		t.Fatalf("entries left %+v, want only the young one (an insert in flight, maybe)", left)
	}

	// A database from before the ready collection: a claimable task
	// without an entry gets one when a store opens it.
	t2 := ids.New(now)
	if _, err := s.TaskInsert(ctx, store.TaskInsertParams{ID: t2, Kind: "k", Priority: rota.PriorityMid,
		Payload: json.RawMessage(`{}`), RunAt: now, HeartbeatTimeoutSeconds: 30, Workers: 1, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ready.DeleteMany(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.tasks.UpdateOne(ctx, id(t2), bson.D{{Key: "$unset", Value: bson.D{{Key: "ready", Value: ""}, {Key: "rk", Value: ""}}}}); err != nil {
		t.Fatal(err)
	}
	if runs := claimOne(t, s, now); len(runs) != 0 {
		t.Fatalf("claimed %+v without an entry (the test's premise)", runs)
	}
	s2 := openReady(t, u)
	if runs := claimOne(t, s2, now); len(runs) != 1 || runs[0].TaskID != t2 {
		t.Fatalf("claim after a reopen: %+v, want the run of %s", runs, t2)
	}
	if n := readyCount(t, s2); n != 0 {
		t.Fatalf("%d ready entries after the last claim, want 0", n)
	}
}
