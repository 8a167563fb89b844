// Package store defines the storage contract of Rota: every state change of
// tasks, runs, kinds and workers is one atomic Store method. Backends live in
// sub-packages (sqlitestore, pgstore) and all pass the conformance suite in
// storetest.
//
// Time is an input: every method that depends on the current time takes it in
// its params (Now), so tests drive a fake clock and backends never read the
// wall clock. Backends store instants in UTC with at least millisecond
// precision.
//
// Errors: methods return the sentinels of package rota, wrapped with context
// (rota.ErrNotFound, rota.ErrConflict, rota.ErrLeaseLost, rota.ErrInvalid);
// driver errors never leak upward unwrapped as the only information.
package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rotahq/rota"
)

// Store is the storage seam. Implementations must be safe for concurrent use.
type Store interface {
	// TaskInsert stores a new task in SCHEDULED with RunAt = params.RunAt.
	// When params.Key is set and an unfinished task (not terminal) of the same
	// kind and key exists, nothing is inserted and that task is returned with
	// Existing = true. Concurrent inserts of the same kind+key yield exactly
	// one task. The kind is created with default settings if unknown.
	TaskInsert(ctx context.Context, p TaskInsertParams) (TaskInsertResult, error)

	// TaskInsertMany inserts several tasks in one transaction with the same
	// rules as TaskInsert; results are in input order. Either all are stored
	// or (on error) none.
	TaskInsertMany(ctx context.Context, ps []TaskInsertParams) ([]TaskInsertResult, error)

	// TaskGet returns a task with its Runs (oldest first). rota.ErrNotFound if
	// there is none.
	TaskGet(ctx context.Context, id string) (*rota.Task, error)

	// TaskList returns tasks newest first (by id, descending), without Runs,
	// filtered by kind/status/key, starting after Cursor (an id from a
	// previous page). NextCursor is empty on the last page.
	TaskList(ctx context.Context, p TaskListParams) (TaskListResult, error)

	// TaskUpdate changes the mutable options of an unfinished task; nil fields
	// are left as they are. A finished task → rota.ErrConflict. Narrowing
	// WorkerIDs so that a running run's worker is no longer allowed asks that
	// run to stop (its next heartbeat answers stop=true); when such a run then
	// ends it ends CANCELED and the task is claimable again by allowed workers.
	TaskUpdate(ctx context.Context, p TaskUpdateParams) (*rota.Task, error)

	// TaskStop cancels a task. A SCHEDULED task becomes CANCELED at once. A
	// RUNNING task is marked stop-requested: heartbeats of its runs answer
	// stop=true, it is claimable no more, and when its last running run ends
	// (by any report, or lease lapse) the task ends CANCELED. A task already
	// terminal → rota.ErrConflict. Stopping twice is not an error.
	TaskStop(ctx context.Context, p TaskStopParams) (*rota.Task, error)

	// TaskClaim hands up to Max claimable tasks of the given kinds to a worker
	// and records the worker as seen (creating it if new). Each claimed task
	// gets a new RUNNING run with lease until Now + heartbeat timeout and, when
	// the task has a timeout, a deadline. See the package doc of dispatch
	// rules in ClaimParams. A worker whose stop was requested gets nothing and
	// Drain = true.
	TaskClaim(ctx context.Context, p TaskClaimParams) (TaskClaimResult, error)

	// TaskNextRunAt returns the earliest RunAt after Now among tasks of the
	// given kinds that are waiting only for their time to come (SCHEDULED,
	// RunAt > Now). ok is false when there is none. Dispatchers use it to
	// sleep exactly until the next delayed task is due.
	TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (next time.Time, ok bool, err error)

	// RunHeartbeat renews a run's lease to Now + the task's heartbeat timeout
	// and records the worker as seen. It fails with rota.ErrLeaseLost when the
	// run is not RUNNING, belongs to another worker, or its lease or deadline
	// has already passed at Now (then it is expired on the spot, as
	// RunExpire would); with rota.ErrNotFound when no such run exists.
	// Stop is true when the run must stop (task stop, narrowed worker ids);
	// Drain is true when the worker was asked to stop.
	RunHeartbeat(ctx context.Context, p RunHeartbeatParams) (RunHeartbeatResult, error)

	// RunComplete ends a run with a worker's report, checked like
	// RunHeartbeat (rota.ErrLeaseLost, rota.ErrNotFound; nothing changes on
	// error). Success counts toward the task's Workers; when that many runs
	// succeeded the task is SUCCESS. A failure with Retry and retries left
	// puts the task back to SCHEDULED at Now + Backoff(failures); otherwise
	// the task FAILED (other running runs are asked to stop). The task's final
	// failure status is TIMEOUT when its last failed run passed its deadline,
	// FAILED otherwise. Failed runs count toward MaxRetries; CANCELED ones do
	// not. A run whose stop was requested ends CANCELED whatever it reports;
	// if the task itself was stopped, the task ends CANCELED when its last
	// running run ends; if only the run was stopped (its worker was removed
	// from WorkerIDs), the task is claimable again at once.
	RunComplete(ctx context.Context, p RunCompleteParams) (*rota.Task, error)

	// RunExpire ends, as TIMEOUT, up to Limit RUNNING runs whose lease expired
	// or whose deadline passed at Now, applying the retry rule (a lapsed lease
	// is retried at once; a passed deadline after Backoff) and returns how
	// many it ended, with the kinds whose tasks became claimable.
	RunExpire(ctx context.Context, p RunExpireParams) (RunExpireResult, error)

	// RunNextExpiry returns the earliest lease expiry or deadline among
	// RUNNING runs; ok is false when no run is RUNNING.
	RunNextExpiry(ctx context.Context) (next time.Time, ok bool, err error)

	// KindList returns every known kind, by name.
	KindList(ctx context.Context) ([]rota.Kind, error)
	// KindGet returns one kind; an unknown kind → rota.ErrNotFound.
	KindGet(ctx context.Context, name string) (*rota.Kind, error)
	// KindUpsert creates or changes a kind; nil fields keep their value
	// (defaults for a new kind).
	KindUpsert(ctx context.Context, p KindUpsertParams) (*rota.Kind, error)

	// WorkerList returns every worker seen, with Status computed at Now.
	WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error)
	// WorkerStop asks a worker to drain; an unknown worker → rota.ErrNotFound.
	WorkerStop(ctx context.Context, id string, now time.Time) (*rota.Worker, error)

	// Stats counts tasks by kind and status and the age of the oldest task
	// waiting to be claimed (SCHEDULED with RunAt ≤ Now) per kind.
	Stats(ctx context.Context, now time.Time) (Stats, error)

	// LeaderAttemptElect makes NodeID the leader until Now + TTL if there is
	// no leader or the leader's lease has passed, or extends the lease if
	// NodeID already leads. Term is the fencing token: it increases each time
	// leadership changes hands, so a deposed leader can tell. Exactly one
	// node can be leader at any instant.
	LeaderAttemptElect(ctx context.Context, p LeaderElectParams) (LeaderElectResult, error)
	// LeaderResign gives up leadership if NodeID holds it, so another node
	// can take over at once.
	LeaderResign(ctx context.Context, nodeID string) error

	// NodeHeartbeat records a live node (created on first call).
	NodeHeartbeat(ctx context.Context, p NodeHeartbeatParams) error
	// NodeList returns the nodes whose last heartbeat is within Liveness of
	// Now, each with Leader set if it holds an unexpired leader lease.
	NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error)
	// NodeRemove forgets a node (on graceful shutdown).
	NodeRemove(ctx context.Context, nodeID string) error

	// SupportsNotify reports whether the store can tell other nodes about
	// changes (Subscribe). Stores used by one process return false.
	SupportsNotify() bool
	// Subscribe calls fn for every change, made by any node, that makes
	// tasks of a kind claimable now or at a later instant (a submit, a retry
	// after backoff, an expired lease, a resumed kind, a stopped run) until
	// ctx ends. Notifications may be coalesced or duplicated, never
	// reordered into the past; receivers treat them as hints. Only for
	// stores whose SupportsNotify is true; others return at once.
	Subscribe(ctx context.Context, fn func(Notification)) error

	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// Defaults applied by the API layer (the store stores what it is given).
const (
	DefaultMaxRetries       = 3
	DefaultHeartbeatTimeout = 30 // seconds
	// WorkerLiveness is how long after it was last seen (plus the long-poll
	// wait of its last claim) a worker counts as active.
	WorkerLiveness = 30 * time.Second
)

// TaskInsertParams describes a new task. Validation is the caller's job; the
// store trusts these values.
type TaskInsertParams struct {
	ID                      string // new id; ignored when an existing keyed task is returned
	Kind                    string
	Priority                rota.Priority
	Payload                 json.RawMessage
	Key                     string
	RunAt                   time.Time
	MaxRetries              int
	TimeoutSeconds          int
	HeartbeatTimeoutSeconds int
	Workers                 int
	WorkerIDs               []string
	ScheduleID              string
	FireTime                time.Time
	Now                     time.Time // CreatedAt
}

// TaskInsertResult is the outcome of one insert.
type TaskInsertResult struct {
	Task     *rota.Task // without Runs
	Existing bool       // an unfinished task with the same kind+key was returned
}

// TaskListParams filters and pages TaskList.
type TaskListParams struct {
	Kind   string      // "" = any
	Status rota.Status // "" = any
	Key    string      // "" = any
	Cursor string      // id of the last task of the previous page; "" = first page
	Limit  int         // 1..1000
}

// TaskListResult is one page of tasks.
type TaskListResult struct {
	Tasks      []rota.Task
	NextCursor string
}

// TaskUpdateParams changes options of an unfinished task.
type TaskUpdateParams struct {
	ID                      string
	Priority                *rota.Priority
	WorkerIDs               *[]string // empty slice = any worker
	HeartbeatTimeoutSeconds *int
	MaxRetries              *int
	Now                     time.Time
}

// TaskStopParams stops a task.
type TaskStopParams struct {
	ID      string
	Message string // recorded as the task's message; default "stopped"
	Now     time.Time
}

// TaskClaimParams asks for work.
//
// Dispatch rules (seed 000 and 002): a task is claimable by worker W when it
// is SCHEDULED or RUNNING with room (running + succeeded runs < Workers), its
// RunAt ≤ Now, its kind is not paused (and under its MaxRunning cap, if any),
// it was not stopped, WorkerIDs is empty or contains W, and W neither runs it
// now nor has succeeded it already. Within a kind, levels are served in
// weighted rounds of f² high, f mid, 1 low (f = the kind's PriorityFactor),
// skipping empty levels, the position in the round persisting across claims;
// within a level, tasks pinned to W (WorkerIDs contains W) come first, then
// by RunAt, then by id. Several kinds are served in the order given.
type TaskClaimParams struct {
	WorkerID      string
	WorkerAddress string
	Kinds         []string
	Max           int
	Wait          time.Duration // long-poll wait of this claim (for liveness)
	Now           time.Time
	NewRunID      func() string // makes the ids of new runs
}

// TaskClaimResult is what a claim got.
type TaskClaimResult struct {
	Runs  []rota.ClaimedRun
	Drain bool // the worker was asked to stop: it gets no work
}

// RunHeartbeatParams renews a lease.
type RunHeartbeatParams struct {
	RunID    string
	WorkerID string
	Now      time.Time
}

// RunHeartbeatResult tells the worker what to do.
type RunHeartbeatResult struct {
	Stop           bool // stop this run (task stopped or worker no longer allowed)
	Drain          bool // the worker was asked to stop
	LeaseExpiresAt time.Time
}

// RunCompleteParams is a worker's report on its run.
type RunCompleteParams struct {
	RunID    string
	WorkerID string
	Success  bool
	Message  string
	Result   json.RawMessage // success only
	Retry    bool            // failure only: false fails the task at once
	Now      time.Time
	// Backoff gives the delay before retry number n (n = failed runs so
	// far, ≥ 1). Nil means retry at once.
	Backoff func(n int) time.Duration
}

// RunExpireParams drives the lease reaper.
type RunExpireParams struct {
	Now     time.Time
	Limit   int
	Backoff func(n int) time.Duration // delay for runs past their deadline
}

// RunExpireResult reports what RunExpire did.
type RunExpireResult struct {
	Expired int
	Kinds   []string // kinds with tasks made claimable (for wake-ups)
	Tasks   []string // ids of the tasks whose runs expired, in expiry order
}

// KindUpsertParams changes a kind's settings.
type KindUpsertParams struct {
	Name             string
	PriorityFactor   *int
	Paused           *bool
	MaxRunning       *int
	Rate             *float64
	RetentionSeconds *int
}

// Stats is a snapshot of the queue.
type Stats struct {
	Kinds []KindStats
}

// KindStats are one kind's counts.
type KindStats struct {
	Kind             string
	Counts           map[rota.Status]int
	OldestWaitingAge time.Duration // 0 when nothing waits
	Paused           bool
}

// WorkerStatusAt derives a worker's status at now: stopped when it was asked
// to stop and holds no runs; lost when not seen within WorkerLiveness plus
// the long-poll wait of its last claim; active otherwise. Backends share it
// so that they agree.
func WorkerStatusAt(lastSeen time.Time, lastWait time.Duration, stopRequested bool, running int, now time.Time) rota.WorkerStatus {
	switch {
	case stopRequested && running == 0:
		return rota.WorkerStopped
	case now.After(lastSeen.Add(WorkerLiveness + lastWait)):
		return rota.WorkerLost
	}
	return rota.WorkerActive
}

// LeaderElectParams asks for leadership.
type LeaderElectParams struct {
	NodeID string
	TTL    time.Duration
	Now    time.Time
}

// LeaderElectResult is the outcome of an election attempt.
type LeaderElectResult struct {
	Leader    bool      // NodeID leads until ExpiresAt
	LeaderID  string    // who leads now ("" if nobody)
	Term      int64     // fencing token of the current leadership
	ExpiresAt time.Time // end of the current leader's lease
}

// NodeHeartbeatParams describes a live node.
type NodeHeartbeatParams struct {
	NodeID    string
	Address   string
	Version   string
	StartedAt time.Time
	Now       time.Time
}

// Notification tells other nodes that tasks of Kind are claimable from
// RunAt on (zero RunAt: now).
type Notification struct {
	Kind  string
	RunAt time.Time
}

// ExpiredError is the error of RunHeartbeat and RunComplete when they found
// the run's lease or deadline passed and expired it on the spot. It wraps a
// lease-lost error (errors.Is(err, rota.ErrLeaseLost) holds) and names the
// kind of the run, whose task may now be claimable again.
type ExpiredError struct {
	Kind   string
	TaskID string
	Err    error
}

func (e *ExpiredError) Error() string { return e.Err.Error() }
func (e *ExpiredError) Unwrap() error { return e.Err }
