package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/redisstore/redistest"
	"github.com/rotahq/rota/internal/store/storetest"
)

// waitKind returns when ch delivers a notification of kind, or false after d.
func waitKind(ch <-chan store.Notification, kind string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case n := <-ch:
			if n.Kind == kind {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func insert(t *testing.T, st store.Store, kind string) {
	t.Helper()
	now := time.Now().UTC()
	var g rota.IDGenerator
	if _, err := st.TaskInsert(context.Background(), store.TaskInsertParams{ID: g.New(now), Kind: kind,
		Priority: rota.PriorityMid, Payload: []byte(`{}`), Workers: 1, HeartbeatTimeoutSeconds: 30, Now: now}); err != nil {
		t.Fatal(err)
	}
}

// TestCrossNodeWakeUp: a task submitted through one node's store wakes a
// subscriber of another node's store (same Redis, same prefix); the
// wake-up latency (submit call to delivery) has p99 ≤ 200 ms.
func TestCrossNodeWakeUp(t *testing.T) {
	u := redistest.URL() + "?prefix=" + redistest.Prefix(t)
	open := func(node string) *redisstore.Store {
		st, err := redisstore.New(context.Background(), redisstore.Config{URL: u, NodeID: node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open("a"), open("b")
	notes := storetest.Subscribe(t, b)
	w0 := time.Now()
	for !waitKind(notes, "warmup", 100*time.Millisecond) { // Subscribe gives no signal once it listens
		insert(t, a, "warmup")
	}
	t.Logf("subscribed after %v", time.Since(w0))
	const n = 200
	var lat []time.Duration
	for i := range n {
		kind := "k" + string(rune('a'+i%26))
		start := time.Now()
		insert(t, a, kind)
		if !waitKind(notes, kind, 5*time.Second) {
			t.Fatalf("wake-up %d of kind %s not heard within 5 s", i, kind)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("cross-node wake-up (submit call → delivery on the other node), n=%d: p50 %v p99 %v max %v",
		n, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), lat[n-1].Round(10*time.Microsecond))
	if p99 > 200*time.Millisecond {
		t.Fatalf("wake-up p99 %v, want ≤ 200 ms", p99)
	}
}

// TestSubscribeResubscribes: when the server drops the subscription (a
// restart of Redis), Subscribe subscribes again and wakes every known kind
// once, as notifications in between are lost.
func TestSubscribeResubscribes(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	url, cmd := startRedis(t, dir, port, aof...)
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	insert(t, st, "known")
	notes := storetest.Subscribe(t, st)
	for !waitKind(notes, "warmup", 100*time.Millisecond) {
		insert(t, st, "warmup")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	startRedis(t, dir, port, aof...)
	if !waitKind(notes, "known", 15*time.Second) {
		t.Fatal("no wake-up of the known kinds after the subscription was lost")
	}
	insert(t, st, "after")
	if !waitKind(notes, "after", 5*time.Second) {
		t.Fatal("no notification after subscribing again")
	}
}
