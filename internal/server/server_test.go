package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: Stop
// must end every loop the server started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSingleNodeIsLeaderAndListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodeID: "solo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if !s.IsLeader() {
		t.Fatal("a single node is not leader after Start")
	}
	resp, err := http.Get("http://" + s.Addr() + "/api/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Code int `json:"code"`
		Data struct {
			Nodes []struct {
				NodeID        string `json:"node_id"`
				Address       string `json:"address"`
				Version       string `json:"version"`
				Leader        bool   `json:"leader"`
				LastHeartbeat int64  `json:"last_heartbeat"`
			} `json:"nodes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if env.Code != 0 || len(env.Data.Nodes) != 1 {
		t.Fatalf("cluster = %+v, want one node", env)
	}
	n := env.Data.Nodes[0]
	if n.NodeID != "solo" || !n.Leader || n.Address != s.Addr() || n.Version != Version || time.Since(time.Unix(n.LastHeartbeat, 0)) > time.Minute {
		t.Fatalf("node = %+v, want solo, leader, at %s, version %s, recently seen", n, s.Addr(), Version)
	}
}

func TestStopReleasesPortAndLeadership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: dir, NodeID: "first", LeaderLease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// A successor on the same data and port leads at once: the first
	// resigned rather than leaving a minute-long lease behind.
	s2, err := New(ctx, Config{Listen: addr, DataDir: dir, NodeID: "second", LeaderLease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(ctx); err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	defer s2.Stop(ctx)
	if !s2.IsLeader() {
		t.Fatal("successor is not leader: the stopped node did not resign")
	}
}

func TestAuthTokenRequired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), AuthToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	base := "http://" + s.Addr()
	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/api/tasks", ""); got != 401 {
		t.Fatalf("no token: %d, want 401", got)
	}
	if got := get("/api/tasks", "wrong"); got != 401 {
		t.Fatalf("wrong token: %d, want 401", got)
	}
	if got := get("/api/tasks", "tok"); got != 200 {
		t.Fatalf("right token: %d, want 200", got)
	}
	if got := get("/api/healthz", ""); got != 200 {
		t.Fatalf("healthz without token: %d, want 200 (probes stay open)", got)
	}
}

func TestCrossSiteRequestRefusedWithEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	req, _ := http.NewRequest("POST", "http://"+s.Addr()+"/api/tasks", strings.NewReader(`{"kind":"k","task":{}}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("403 body is not an envelope: %v", err)
	}
	if resp.StatusCode != 403 || env.Code != 40300 {
		t.Fatalf("cross-site POST: %d %+v, want 403 and code 40300", resp.StatusCode, env)
	}
	// The same request from a non-browser client (no such headers) passes.
	resp2, err := http.Post("http://"+s.Addr()+"/api/tasks", "application/json", strings.NewReader(`{"kind":"k","task":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 200 {
		t.Fatalf("plain POST: %d, want 200", resp2.StatusCode)
	}
}

// Each node reports the version it was configured with.
func TestClusterShowsConfiguredVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodeID: "v", Version: "9.8.7-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	nodes, err := s.store.NodeList(ctx, time.Now(), time.Minute)
	if err != nil || len(nodes) != 1 || nodes[0].Version != "9.8.7-test" {
		t.Fatalf("nodes = %+v, %v; want one at version 9.8.7-test", nodes, err)
	}
}

// Stopping never hangs: not after the context given to Start ended (the
// loops already stopped with it), and not twice.
func TestStopAfterStartContextEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	stopped := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		stopped <- s.Stop(sctx)
	}()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop hangs after the start context ended")
	}
}
