package store

import (
	"encoding/json"
	"time"

	"github.com/rotahq/rota"
)

// ClaimCandidate is a claimable task as a backend's claim reads it.
type ClaimCandidate struct {
	ID                      string
	Payload                 []byte
	Level                   int    // rota.Priority.Level
	Attempt                 int    // runs so far
	TimeoutSeconds          int    // 0: none
	HeartbeatTimeoutSeconds int    // the lease
	RunAt                   int64  // unix ms
	ScheduleID              string // the schedule that fired the task; "" if none
	FireTime                int64  // its nominal fire time, unix ms; 0 if none
}

// Start is the run a claim at now (unix ms) makes of the candidate, with
// run id runID: the next attempt, a lease of HeartbeatTimeoutSeconds and a
// deadline TimeoutSeconds on (0: none). lease and deadline are what the
// backend stores (unix ms).
func (c ClaimCandidate) Start(kind, runID string, now int64) (run rota.ClaimedRun, lease, deadline int64) {
	lease = now + int64(c.HeartbeatTimeoutSeconds)*1000
	if c.TimeoutSeconds > 0 {
		deadline = now + int64(c.TimeoutSeconds)*1000
	}
	return rota.ClaimedRun{
		TaskID: c.ID, RunID: runID, Kind: kind, Priority: rota.PriorityOfLevel(c.Level),
		Payload: json.RawMessage(c.Payload), Attempt: c.Attempt + 1, HeartbeatTimeoutSeconds: c.HeartbeatTimeoutSeconds,
		TimeoutSeconds: c.TimeoutSeconds, LeaseExpiresAt: FromMillis(lease), RunAt: FromMillis(c.RunAt),
		ScheduleID: c.ScheduleID, FireTime: FromMillis(c.FireTime),
	}, lease, deadline
}

// RateLimit records that a kind's rate bucket held the claim back until
// until (unix ms; 0: it did not): RateLimitedUntil keeps the earliest.
func (r *TaskClaimResult) RateLimit(until int64) {
	if until != 0 && (r.RateLimitedUntil.IsZero() || until < Millis(r.RateLimitedUntil)) {
		r.RateLimitedUntil = FromMillis(until)
	}
}

// StartFor names the waiting claim a submitted task goes to at once (a
// hand-off, see Startable): the claiming worker, its address, the new
// run's id and the instant of the submit, which is also the run's start.
type StartFor struct {
	WorkerID      string
	WorkerAddress string
	RunID         string
	Now           time.Time
}

// Startable reports whether the submit of p may hand its task straight to
// a waiting claim: a single-worker task, claimable at now, for any worker,
// unkeyed (a key may name an existing task) and without dependencies. The
// store still checks the rest (see a backend's TaskInsertStarted).
func Startable(p TaskInsertParams, now time.Time) bool {
	return p.Workers == 1 && p.Key == "" && len(p.WorkerIDs) == 0 && len(p.DependsOn) == 0 &&
		len(p.DependsOnItems) == 0 && !p.RunAt.After(now)
}
