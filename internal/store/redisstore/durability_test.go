package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/redisstore"
)

// startRedis runs a redis-server of the test's own on a free loopback
// port, with dir as its data directory and extra settings; it returns its
// URL and the process (killed at the end).
func startRedis(t *testing.T, dir string, port int, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", ""}, extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server (is it installed?): %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return url, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %d did not come up: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// aof are the settings of a durable Redis.
var aof = []string{"--appendonly", "yes", "--appendfsync", "always"}

// openDurable starts a durable redis-server of the test's own on dir and
// port and opens a store on it.
func openDurable(t *testing.T, dir string, port int) (*redisstore.Store, *exec.Cmd) {
	t.Helper()
	url, cmd := startRedis(t, dir, port, aof...)
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return st, cmd
}

// TestKill9KeepsAcknowledgedTasks: with appendonly yes and appendfsync
// always, every task whose insert was acknowledged is still there after
// Redis is killed with SIGKILL and restarted on the same files.
func TestKill9KeepsAcknowledgedTasks(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	st, cmd := openDurable(t, dir, port)
	ctx := context.Background()
	if got := st.Durability(); got != redisstore.Durable {
		t.Fatalf("Durability() = %q with appendfsync always, want %q", got, redisstore.Durable)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var acked []string
	ids := rota.IDGenerator{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // insert until Redis dies under us
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := ids.New(base)
			if _, err := st.TaskInsert(ctx, store.TaskInsertParams{ID: id, Kind: "k", Priority: rota.PriorityMid,
				Payload: []byte(`{}`), MaxRetries: 1, Workers: 1, HeartbeatTimeoutSeconds: 30, Now: base}); err != nil {
				return
			}
			acked = append(acked, id)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	close(stop)
	<-done
	st.Close()
	if len(acked) == 0 {
		t.Fatal("no insert was acknowledged before the kill")
	}
	st2, _ := openDurable(t, dir, port)
	defer st2.Close()
	for _, id := range acked {
		if _, err := st2.TaskGet(ctx, id); err != nil {
			t.Fatalf("acknowledged task %s lost after kill -9 (%d acknowledged): %v", id, len(acked), err)
		}
	}
	t.Logf("%d acknowledged tasks, all present after kill -9", len(acked))
}

// TestRelaxedDurabilityStated: without appendfsync always the store says
// so.
func TestRelaxedDurabilityStated(t *testing.T) {
	url, _ := startRedis(t, t.TempDir(), freePort(t), "--appendonly", "yes", "--appendfsync", "everysec")
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.Durability(); got != redisstore.Relaxed {
		t.Fatalf("Durability() = %q with appendfsync everysec, want %q", got, redisstore.Relaxed)
	}
}

// TestUnreachableFailsFast: a Redis nobody listens on fails New within
// 10 s with the URL, without its password.
func TestUnreachableFailsFast(t *testing.T) {
	url := fmt.Sprintf("redis://user:secret@127.0.0.1:%d/0", freePort(t))
	start := time.Now()
	_, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err == nil {
		t.Fatal("New on a closed port: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("New took %v, want ≤ 10 s", d)
	}
	msg := err.Error()
	if want := strings.TrimPrefix(url, "redis://user:secret@"); !strings.Contains(msg, want) || strings.Contains(msg, "secret") {
		t.Fatalf("error %q: want the URL (%s) without its password", msg, want)
	}
}

// TestLostRedisIsUnavailable: while Redis is down, writes and PingWrite
// fail with rota.ErrUnavailable (503 for the API, readyz not ready); once
// it is back the same store works again, and nothing acknowledged is lost.
func TestLostRedisIsUnavailable(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	st, cmd := openDurable(t, dir, port)
	defer st.Close()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids rota.IDGenerator
	p := store.TaskInsertParams{ID: ids.New(base), Kind: "k", Priority: rota.PriorityMid, Payload: []byte(`{}`),
		Workers: 1, HeartbeatTimeoutSeconds: 30, Now: base}
	if _, err := st.TaskInsert(ctx, p); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	p2 := p
	p2.ID = ids.New(base)
	if _, err := st.TaskInsert(ctx, p2); !errors.Is(err, rota.ErrUnavailable) {
		t.Fatalf("TaskInsert with Redis down: %v, want rota.ErrUnavailable", err)
	}
	if err := st.PingWrite(ctx, base); !errors.Is(err, rota.ErrUnavailable) {
		t.Fatalf("PingWrite with Redis down: %v, want rota.ErrUnavailable", err)
	}
	startRedis(t, dir, port, aof...)
	deadline := time.Now().Add(10 * time.Second)
	for st.PingWrite(ctx, base) != nil {
		if time.Now().After(deadline) {
			t.Fatal("store not writable 10 s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := st.TaskGet(ctx, p.ID); err != nil {
		t.Fatalf("acknowledged task after the outage: %v", err)
	}
	if _, err := st.TaskInsert(ctx, p2); err != nil {
		t.Fatalf("TaskInsert after Redis came back: %v", err)
	}
}
