package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/redisstore/redistest"
)

// openRaw opens a store on a prefix of its own and a plain client on the
// same Redis, to read and write its keys directly.
func openRaw(t *testing.T) (*redisstore.Store, *redis.Client, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: redistest.URL() + "?prefix=" + prefix, NodeID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	opts, _, err := redisstore.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return s, c, prefix
}

// TestKindWithoutDispatch: a kind's record written before the dispatch
// setting existed reads as a pull kind, and keeps its other settings.
func TestKindWithoutDispatch(t *testing.T) {
	s, c, prefix := openRaw(t)
	ctx := context.Background()
	if err := c.HSet(ctx, prefix+"k:old", "v", 1, "d",
		`{"Name":"old","PriorityFactor":3,"Paused":true,"MaxRunning":0,"Rate":0,"RetentionSeconds":0}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, prefix+"kinds", redis.Z{Member: "old"}).Err(); err != nil {
		t.Fatal(err)
	}
	k, err := s.KindGet(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if k.Dispatch != rota.DispatchPull || k.PriorityFactor != 3 || !k.Paused {
		t.Fatalf("KindGet = %+v, want pull, factor 3, paused", *k)
	}
	ks, err := s.KindList(ctx)
	if err != nil || len(ks) != 1 || ks[0].Dispatch != rota.DispatchPull {
		t.Fatalf("KindList = %+v, %v; want old as pull", ks, err)
	}
	k, err = s.KindUpsert(ctx, store.KindUpsertParams{Name: "old", Paused: new(bool)})
	if err != nil || k.Dispatch != rota.DispatchPull || k.PriorityFactor != 3 {
		t.Fatalf("KindUpsert = %+v, %v; want pull, factor 3", k, err)
	}
}

// TestPushPruneDropsRegistration: a pruned push worker leaves no key or
// set entry behind, and a later sighting of it does not revive it.
func TestPushPruneDropsRegistration(t *testing.T) {
	s, c, prefix := openRaw(t)
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0).UTC()
	if _, err := s.WorkerRegister(ctx, store.WorkerRegisterParams{WorkerID: "p1", Kinds: []string{"a"},
		Address: "http://p1.example/", Capacity: 1, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.WorkerPrune(ctx, store.WorkerPruneParams{SeenBefore: t0.Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("WorkerPrune = %d, %v; want 1", n, err)
	}
	if err := s.PushWorkersSeen(ctx, []string{"p1"}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Exists(ctx, prefix+"w:p1", prefix+"pushworkers").Result()
	if err != nil || n != 0 {
		t.Fatalf("keys left of a pruned push worker: %d, %v", n, err)
	}
	ws, err := s.WorkerList(ctx, t0.Add(2*time.Hour))
	if err != nil || len(ws) != 0 {
		t.Fatalf("WorkerList = %+v, %v; want none", ws, err)
	}
}
