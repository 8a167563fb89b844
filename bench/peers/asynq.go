package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqKind is the type name of every Asynq benchmark task.
const asynqKind = "peers:noop"

// redisCases are the Redis cases (issue 14): Rota on its Redis store next to
// Asynq (github.com/hibiken/asynq), each on a fresh redis-server of its own
// with appendfsync always and with everysec, passed to add.
func redisCases(p params, add func(caseSpec)) {
	for _, fsync := range []string{"always", "everysec"} {
		add(caseSpec{System: "rota-redis", Scenario: "submit-single", Fsync: fsync, Variant: "rotaclient, appendfsync " + fsync})
		add(caseSpec{System: "asynq", Scenario: "submit-single", Fsync: fsync, Variant: "Client.Enqueue, appendfsync " + fsync})
		add(caseSpec{System: "rota-redis", Scenario: "e2e", Fsync: fsync,
			Variant: fmt.Sprintf("rotaworker, concurrency %d, appendfsync %s", p.SDKConcurrency, fsync)})
		add(caseSpec{System: "asynq", Scenario: "e2e", Fsync: fsync,
			Variant: fmt.Sprintf("Concurrency 100, %d enqueuers, appendfsync %s", p.Clients, fsync)})
	}
}

// runOnRedis runs one case of a Redis system on a fresh redis-server
// (appendonly, appendfsync spec.Fsync, no RDB snapshots), killed
// afterwards: Rota in a server process, Asynq in a child process as River.
func runOnRedis(ctx context.Context, bin string, spec caseSpec, run int) (caseResult, error) {
	rs, err := startRedis(ctx, spec.Fsync)
	if err != nil {
		return caseResult{}, err
	}
	defer rs.stop()
	spec.Redis, spec.RedisPID = rs.addr, rs.cmd.Process.Pid
	if spec.System == "asynq" {
		return runRiverChild(ctx, spec)
	}
	return runRota(ctx, bin, spec, nil, "", run)
}

// redisServer is a redis-server process on a fresh directory.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

// startRedis starts a redis-server on a free loopback port and waits until
// it answers PING.
func startRedis(ctx context.Context, fsync string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "peers-redis")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	rs := &redisServer{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	c := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(ctx).Err(); err == nil {
			return rs, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			rs.stop()
			return nil, fmt.Errorf("redis-server on %s not ready: %w", rs.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills the server and removes its directory.
func (rs *redisServer) stop() {
	_ = rs.cmd.Process.Kill()
	_ = rs.cmd.Wait()
	os.RemoveAll(rs.dir)
}

// runAsynq runs one Asynq case (in the child process) on spec.Redis.
func runAsynq(ctx context.Context, spec caseSpec) (res caseResult, err error) {
	opt := asynq.RedisClientOpt{Addr: spec.Redis}
	client := asynq.NewClient(opt)
	defer client.Close()
	w := &window{proc: os.Getpid(), pg: func() []int { return []int{spec.RedisPID} }}
	switch spec.Scenario {
	case "submit-single":
		w.begin()
		start := time.Now()
		err = enqueueAll(ctx, client, spec.P.Clients, spec.P.SubmitTasks)
		res.Metrics = []metric{throughput("tasks accepted", spec.P.SubmitTasks, time.Since(start))}
	case "e2e":
		res.Metrics, err = asynqE2E(ctx, spec, opt, client, w)
	default:
		err = fmt.Errorf("unknown scenario %q for asynq", spec.Scenario)
	}
	if err != nil {
		return res, err
	}
	res.Usage = w.end()
	res.PeakRSSKiB, err = peakRSS(os.Getpid())
	return res, err
}

// enqueueAll enqueues n no-op tasks from clients goroutines, one
// Client.Enqueue (one round trip) each: Asynq has no batch enqueue.
func enqueueAll(ctx context.Context, client *asynq.Client, clients, n int) error {
	var next atomic.Int64
	return parallel(clients, func(int) error {
		for next.Add(1) <= int64(n) {
			if _, err := client.EnqueueContext(ctx, asynq.NewTask(asynqKind, []byte("{}"))); err != nil {
				return fmt.Errorf("asynq enqueue: %w", err)
			}
		}
		return nil
	})
}

// asynqE2E: an asynq.Server (Concurrency 100, defaults otherwise) runs
// no-op handlers while p.Clients goroutines enqueue p.E2ETasks tasks;
// timed from the first enqueue until the queue's processed counter (which
// Asynq bumps when it marks a task done, after the handler) reaches n.
func asynqE2E(ctx context.Context, spec caseSpec, opt asynq.RedisClientOpt, client *asynq.Client, w *window) ([]metric, error) {
	n := spec.P.E2ETasks
	rec := newRecorder(n)
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 100, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqKind, func(context.Context, *asynq.Task) error { rec.add(0); return nil })
	if err := srv.Start(mux); err != nil {
		return nil, fmt.Errorf("asynq server: %w", err)
	}
	defer srv.Shutdown()
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	time.Sleep(spec.P.Warmup)
	w.begin()
	start := time.Now()
	if err := enqueueAll(ctx, client, spec.P.Clients, n); err != nil {
		return nil, err
	}
	if err := rec.wait(10 * time.Minute); err != nil {
		return nil, err
	}
	for {
		info, err := insp.GetQueueInfo("default")
		if err != nil {
			return nil, fmt.Errorf("asynq inspector: %w", err)
		}
		if info.ProcessedTotal >= n {
			break
		}
		if time.Since(start) > 11*time.Minute {
			return nil, errors.New("asynq: tasks not all marked done")
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(start)
	w.end()
	return []metric{throughput("tasks done", n, d)}, nil
}
