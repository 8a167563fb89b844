package store

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	start := now.Add(-10 * time.Second)
	base := SettleTask{Workers: 1, MaxRetries: 2, HeartbeatTimeoutSeconds: 30, TimeoutSeconds: 5, RunAt: start, Message: "stop: operator"}
	backoff := func(n int) time.Duration { return time.Duration(n) * time.Second }
	cases := []struct {
		name   string
		task   func(*SettleTask)
		run    SettleRun
		status rota.Status
		runAt  time.Time
		msg    string
		check  func(*testing.T, Settled)
	}{
		{"success ends it", nil, SettleRun{Outcome: OutcomeSuccess, Message: "ok", Result: []byte(`1`)},
			rota.StatusSuccess, start, "ok", func(t *testing.T, s Settled) {
				if !s.Done || s.Avail || s.Successes != 1 || string(s.Result) != "1" || !s.EndTime.Equal(now) {
					t.Fatalf("%+v", s)
				}
			}},
		{"one of two successes waits", func(t *SettleTask) { t.Workers = 2 }, SettleRun{Outcome: OutcomeSuccess},
			rota.StatusScheduled, start, "", func(t *testing.T, s Settled) {
				if s.Done || !s.Avail {
					t.Fatalf("%+v", s)
				}
			}},
		{"failure retries after backoff", nil, SettleRun{Outcome: OutcomeFailure, Retry: true, Message: "boom", Backoff: backoff},
			rota.StatusScheduled, now.Add(time.Second), "boom", nil},
		{"failure without retry is final", nil, SettleRun{Outcome: OutcomeFailure, Message: "bad"},
			rota.StatusFailed, start, "bad", nil},
		{"retries exhausted", func(t *SettleTask) { t.Failures = 2 }, SettleRun{Outcome: OutcomeFailure, Retry: true, Backoff: backoff},
			rota.StatusFailed, start, "failed", nil},
		{"final deadline is TIMEOUT", func(t *SettleTask) { t.Failures = 2 }, SettleRun{Outcome: OutcomeDeadlinePassed, Backoff: backoff},
			rota.StatusTimeout, start, "timeout: the run exceeded 5s", nil},
		{"final lease lapse is FAILED", func(t *SettleTask) { t.Failures = 2 }, SettleRun{Outcome: OutcomeLeaseLapsed},
			rota.StatusFailed, start, "lease expired: no heartbeat within 30s", nil},
		{"lapsed lease retried at once", nil, SettleRun{Outcome: OutcomeLeaseLapsed, Backoff: backoff},
			rota.StatusScheduled, now, "lease expired: no heartbeat within 30s", nil},
		{"nil backoff retries at once", nil, SettleRun{Outcome: OutcomeFailure, Retry: true},
			rota.StatusScheduled, now, "failed", nil},
		{"release costs nothing", nil, SettleRun{Outcome: OutcomeReleased},
			rota.StatusScheduled, now, "released by its worker", func(t *testing.T, s Settled) {
				if s.Failures != 0 || !s.Avail {
					t.Fatalf("%+v", s)
				}
			}},
		{"stopped task cancels and keeps its reason", func(t *SettleTask) { t.StopRequested = true },
			SettleRun{Outcome: OutcomeSuccess, StopRequested: true, Message: "ctx canceled"},
			rota.StatusCanceled, start, "stop: operator", func(t *testing.T, s Settled) {
				if s.Successes != 0 || s.Avail {
					t.Fatalf("%+v", s)
				}
			}},
		{"stopped task waits for its last run", func(t *SettleTask) { t.StopRequested = true; t.Running = 1; t.Workers = 2 },
			SettleRun{Outcome: OutcomeFailure, StopRequested: true},
			rota.StatusRunning, start, "stop: operator", nil},
		{"final failure stops the others", func(t *SettleTask) { t.Workers = 2; t.Running = 1; t.MaxRetries = 0 },
			SettleRun{Outcome: OutcomeFailure, Retry: true},
			rota.StatusFailed, start, "failed", func(t *testing.T, s Settled) {
				if !s.StopOthers {
					t.Fatalf("%+v", s)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			task := base
			if c.task != nil {
				c.task(&task)
			}
			c.run.Now = now
			s := Settle(task, c.run)
			if s.Status != c.status || !s.RunAt.Equal(c.runAt) || s.Message != c.msg {
				t.Fatalf("Settle = status %s, run_at %v, message %q; want %s, %v, %q", s.Status, s.RunAt, s.Message, c.status, c.runAt, c.msg)
			}
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}
