package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store/redisstore/redistest"
)

// clusterDurability is the durability GET /api/cluster shows on s.
func clusterDurability(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/api/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Durability string `json:"durability"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Durability
}

// TestRedisDurabilityStated: on a Redis without appendfsync always (the
// machine's test Redis keeps nothing on disk) the server warns at start
// and GET /api/cluster says "relaxed"; the embedded store says "durable"
// unless --relaxed.
func TestRedisDurabilityStated(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	s := startServer(t, Config{Store: redistest.URL() + "?prefix=" + redistest.Prefix(t), NodeID: "r1",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := clusterDurability(t, s); got != "relaxed" {
		t.Fatalf("durability on a Redis without appendfsync always = %q, want relaxed", got)
	}
	if !strings.Contains(logs.String(), "durability is relaxed") {
		t.Fatalf("no warning at start; log:\n%s", logs.String())
	}
	ctx := context.Background()
	d, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodeID: "d1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	}()
	if got := clusterDurability(t, d); got != "durable" {
		t.Fatalf("durability of the embedded store = %q, want durable", got)
	}
}

// TestUnreachableRedisFailsFast: a Redis nobody answers fails New within
// 10 s, naming the URL without its password.
func TestUnreachableRedisFailsFast(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Store: "redis://rota:hunter2@127.0.0.1:1/0", Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("New on an unreachable Redis: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("New took %v, want ≤ 10 s", d)
	}
	if msg := err.Error(); !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "hunter2") {
		t.Fatalf("error %q: want the URL without its password", msg)
	}
}
