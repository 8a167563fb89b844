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
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// Store is the storage seam. Implementations must be safe for concurrent use.
type Store interface {
	// Schedules: see ScheduleStore.
	ScheduleStore
	// Tokens and the audit log: see AccessStore.
	AccessStore
	// The cluster's event log: see EventStore.
	EventStore
	// Push workers: see PushStore.
	PushStore

	// TaskInsert stores a new task in SCHEDULED with RunAt = params.RunAt.
	// When params.Key is set and a task of the same kind holds that key —
	// unfinished or finished: a key is free again only once its task is
	// deleted (TaskCleanup) — nothing is inserted and that task is returned
	// with Existing = true. With RerunIfFinished, a finished holder is made
	// claimable again under its own id (Rerun = true): its runs are cleared,
	// its counters reset and its RunAt is params.RunAt; its definition
	// (payload, priority, options) is kept. An unfinished holder is never
	// disturbed. Concurrent inserts of the same kind+key yield exactly one
	// task, and concurrent reruns of one finished task exactly one rerun.
	// The kind is created with default settings if unknown.
	//
	// Dependencies (DependsOn, DependsOnItems): a task inserted with
	// dependencies is stored WAITING (not claimable) while one of them has
	// not succeeded; when the last succeeds it becomes SCHEDULED (claimable
	// at its RunAt) in the transaction that settles that parent. When a
	// parent ends FAILED, CANCELED or TIMEOUT (for good), every WAITING task
	// downstream of it ends CANCELED with a message starting with
	// DependencyFailed, in that same transaction. A dependency that does not
	// exist is rota.ErrInvalid on field depends_on; one already failed
	// cancels the new task at once. Dependencies only name tasks that exist
	// before the new one, so no cycle can form. A keyed insert answered by
	// an existing task ignores its dependencies; a rerun does not wait for
	// them again.
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
	// TaskCountByStatus counts the tasks matching p's filters but its
	// statuses (Cursor and Limit ignored), by status; statuses without
	// tasks are absent.
	TaskCountByStatus(ctx context.Context, p TaskListParams) (map[rota.Status]int, error)

	// TaskHistory aggregates the finished tasks still stored whose end
	// time falls in p's buckets: counts by outcome, queue wait and run
	// duration (see HistoryBucket). Tasks deleted by retention are gone
	// from it.
	TaskHistory(ctx context.Context, p HistoryParams) ([]HistoryBucket, error)
	// TaskDeleteFinished deletes, with their runs and links, the tasks of
	// ids that are finished (at most BulkBatch ids) and returns how many
	// it deleted; unknown and unfinished ones are left alone.
	TaskDeleteFinished(ctx context.Context, ids []string) (int, error)

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
	// from WorkerIDs), the task is claimable again at once. The task
	// returned has its Runs and, when it ended, its Dependents (whose
	// status its end may have changed).
	RunComplete(ctx context.Context, p RunCompleteParams) (*rota.Task, error)

	// RunExpire ends, as TIMEOUT, up to Limit RUNNING runs whose lease expired
	// or whose deadline passed at Now, applying the retry rule (a lapsed lease
	// is retried at once; a passed deadline after Backoff) and returns how
	// many it ended, with the kinds whose tasks became claimable. A leader
	// duty: fenced by Term (ErrFenced, nothing changed).
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
	// WorkerListPage returns one page of workers by id, after Cursor,
	// filtered by Status (at Now) and Kind; NextCursor is empty on the
	// last page.
	WorkerListPage(ctx context.Context, p WorkerListParams) (WorkerListResult, error)
	// WorkerRunsActive returns the running runs of each of workerIDs, by
	// worker id, oldest start first; a worker holding none is absent.
	WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error)
	// TaskPinnedWaiting returns the claimable pinned tasks at now (due,
	// with room for a run, paused kinds included), grouped by kind and
	// named workers (sorted), each group with its oldest ready time; at
	// most MaxPinnedGroups groups, by kind.
	TaskPinnedWaiting(ctx context.Context, now time.Time) ([]PinnedWaiting, error)
	// WorkerDeregister records that a worker stopped gracefully (it was
	// seen at now): it lists as stopped once it holds no runs, until it
	// claims again. An unknown worker → rota.ErrNotFound.
	WorkerDeregister(ctx context.Context, id string, now time.Time) (*rota.Worker, error)
	// WorkerPrune deletes up to Limit workers not seen since SeenBefore
	// that hold no running run, and returns how many it deleted. A leader
	// duty (worker retention).
	WorkerPrune(ctx context.Context, p WorkerPruneParams) (int, error)

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

	// TaskCleanup deletes, with their runs, up to Limit finished tasks
	// whose EndTime is older than their kind's RetentionSeconds at Now
	// (kinds with RetentionSeconds 0 keep everything), oldest first, and
	// returns how many it deleted (separate retentions for succeeded and failed tasks); a
	// leader duty: fenced by Term (ErrFenced, nothing deleted).
	TaskCleanup(ctx context.Context, p TaskCleanupParams) (int, error)

	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	// PingWrite checks the store accepts writes: it commits a small
	// write that changes nothing a client sees (Now is recorded). A full
	// disk or a lost database → a rota.ErrUnavailable error.
	PingWrite(ctx context.Context, now time.Time) error
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
	// RerunIfFinished: when Key is held by a finished task, run that task
	// again (see TaskInsert) rather than answer it as it is.
	RerunIfFinished bool
	// DependsOn names existing tasks this one waits for; DependsOnItems
	// names earlier items of the same TaskInsertMany by index (their
	// resulting task ids). See DependencyRules.
	DependsOn      []string
	DependsOnItems []int
}

// DependencyFailed is the reason (message prefix) of a task canceled
// because one of its dependencies ended without success.
const DependencyFailed = "dependency_failed"

// MaxDependencies bounds the dependencies of one task.
const MaxDependencies = 100

// TaskInsertResult is the outcome of one insert.
type TaskInsertResult struct {
	Task     *rota.Task // without Runs
	Existing bool       // the task holding the same kind+key was returned, nothing inserted
	Rerun    bool       // that task was finished and is claimable again (RerunIfFinished); Existing too
}

// TaskListParams filters and pages TaskList.
type TaskListParams struct {
	Kind     string        // "" = any
	Status   rota.Status   // "" = any
	Statuses []rota.Status // any of these; empty = any
	Key      string        // "" = any
	Priority rota.Priority // "" = any
	WorkerID string        // tasks with a run by this worker; "" = any
	// Search matches tasks whose id is it, or whose key or message holds
	// it (case-insensitive); "" = any.
	Search string
	// DependsOn: only tasks that depend on this task id; "" = any.
	DependsOn string
	// ScheduleID: only tasks fired by this schedule; "" = any.
	ScheduleID string
	// Time ranges: After is inclusive, Before exclusive; the zero time
	// leaves that side open. Finished ranges only match finished tasks.
	CreatedAfter, CreatedBefore   time.Time
	RunAfter, RunBefore           time.Time
	FinishedAfter, FinishedBefore time.Time
	// Sort orders the list (see TaskSort); the zero value is newest
	// first by id, as ever.
	Sort TaskSort
	// Cursor is where the previous page ended: with the default sort the
	// id of its last task; with another sort the NextCursor it returned
	// (ParseSortCursor reads it). "" = first page.
	Cursor string
	Limit  int // 1..1000
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
// Dispatch rules: a task is claimable by worker W when it
// is SCHEDULED or RUNNING with room (running + succeeded runs < Workers), its
// RunAt ≤ Now, its kind is not paused (and under its MaxRunning cap, if any,
// and with a token of its Rate bucket, if any: the bucket holds up to
// max(1, Rate) tokens and refills at Rate per second),
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
	// RunIDBlock, when set, reserves n ids of new runs as
	// rota.IDGenerator.NewBlock does (the i-th is prefix followed by the 16
	// hex digits of first+i), for a store that names runs before it knows
	// how many it hands out: pgstore's one-statement claim reserves Max.
	RunIDBlock func(n int) (prefix string, first uint64)
	// PinnedOnly restricts the claim to tasks pinned to WorkerID (whose
	// WorkerIDs contains it): unpinned tasks of the kinds are left to other
	// workers, even when nothing else is claimable. The order among the
	// pinned tasks, the weighted round, pause, cap and rate are as for any
	// claim; RateLimitedUntil is only set when a pinned task waits. Rota's
	// HTTP executor (rota.HTTPWorkerID) claims so.
	PinnedOnly bool
	// Woken says the claim follows a wake-up (a submit, a report that
	// freed a place): work is likely, so a store may skip what only pays
	// off when nothing is claimable (pgstore: the probes that keep an
	// empty claim from locking). A hint: the result is the same.
	Woken bool
}

// TaskClaimResult is what a claim got.
type TaskClaimResult struct {
	Runs  []rota.ClaimedRun
	Drain bool // the worker was asked to stop: it gets no work
	// RateLimitedUntil is set when a kind asked for had claimable tasks but
	// no rate tokens left: the instant its next token is due, so a waiting
	// claim can sleep exactly that long.
	RateLimitedUntil time.Time
}

// RunHeartbeatParams renews a lease.
type RunHeartbeatParams struct {
	RunID    string
	WorkerID string
	Message  string // progress note recorded as the run's message ("" keeps it)
	Now      time.Time
}

// RunHeartbeatResult tells the worker what to do.
type RunHeartbeatResult struct {
	Stop           bool // stop this run (task stopped or worker no longer allowed)
	Drain          bool // the worker was asked to stop
	LeaseExpiresAt time.Time
	// HeartbeatTimeoutSeconds is the task's current lease length, so that
	// a changed heartbeat timeout reaches the running worker.
	HeartbeatTimeoutSeconds int
}

// RunCompleteParams is a worker's report on its run.
type RunCompleteParams struct {
	RunID    string
	WorkerID string
	Success  bool
	Message  string
	Result   json.RawMessage // success only
	Retry    bool            // failure only: false fails the task at once
	// Release hands the run back unfinished (a worker stopping gracefully):
	// the run ends CANCELED, nothing counts against the task, and it is
	// claimable again at once. Success, Result and Retry are ignored.
	Release bool
	Now     time.Time
	// Backoff gives the delay before retry number n (n = failed runs so
	// far, ≥ 1). Nil means retry at once.
	Backoff func(n int) time.Duration
	// Brief says that the caller reads only these fields of the task
	// returned: ID, Kind, Status, Attempt, Message, Result, RunAt,
	// EndTime, ScheduleID, FireTime and Dependents, and of Runs only the
	// reported run's ID, WorkerID, Status, Attempt and Message. A store
	// may then leave the other fields zero and the other runs out (the
	// HTTP reports and the dispatcher's events need no more: pgstore's
	// common report then reads back 10 columns instead of the task's 35).
	// A store that ignores it answers the whole task, as without it.
	Brief bool
}

// RunExpireParams drives the lease reaper.
type RunExpireParams struct {
	Now     time.Time
	Limit   int
	Backoff func(n int) time.Duration // delay for runs past their deadline
	Term    int64                     // leadership fencing token (see CheckFence)
}

// TaskCleanupParams drives the retention cleanup.
type TaskCleanupParams struct {
	Now   time.Time
	Limit int   // at most this many tasks (default 1000)
	Term  int64 // leadership fencing token (see CheckFence)
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
	Dispatch         *string // rota.DispatchPull or rota.DispatchPush
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
// to stop (or deregistered: pass stopRequested true) and holds no runs; lost when not seen within WorkerLiveness plus
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
	// Term, when above 0, says the leadership was decided outside the
	// store (an external registry such as etcd, whose terms grow with each
	// new leader) and the store only records it, so that its fencing
	// (CheckFence) follows the registry: NodeID takes the row at once with
	// that term when it is above the row's, keeps its own row (same term,
	// lease extended) while its lease runs, and otherwise takes a row whose
	// lease has passed with the row's term + 1 (a registry term at or below
	// terms the store already gave out); a smaller term against another
	// node's running lease is refused (a stale registry leader). See
	// ElectLeader. 0: the store elects by lease alone.
	Term int64
}

// LeaderRow is the single leader row of a store: who leads, in which term,
// until when (unix ms).
type LeaderRow struct {
	NodeID    string
	Term      int64
	ExpiresAt int64
}

// ElectLeader decides an election attempt p against the leader row cur
// (found false when there is none): the row as it must be afterwards, and
// whether it changed. It is the rule of LeaderAttemptElect, shared by the
// backends that read the row and write it back in one transaction:
//   - no row: NodeID leads in term max(1, p.Term);
//   - NodeID holds an unexpired row whose term is at least p.Term: the lease
//     is extended, the term kept;
//   - p.Term above the row's term (a newer registry leadership): NodeID
//     takes the row with p.Term, whoever held it;
//   - the row's lease has passed: NodeID takes it with the row's term + 1;
//   - otherwise another node leads: nothing changes.
//
// Terms therefore only grow, and each leadership has its own.
func ElectLeader(cur LeaderRow, found bool, p LeaderElectParams) (LeaderRow, bool) {
	now := Millis(p.Now)
	exp := now + p.TTL.Milliseconds()
	switch {
	case !found:
		return LeaderRow{NodeID: p.NodeID, Term: max(1, p.Term), ExpiresAt: exp}, true
	case cur.NodeID == p.NodeID && cur.ExpiresAt > now && cur.Term >= p.Term:
		return LeaderRow{NodeID: p.NodeID, Term: cur.Term, ExpiresAt: exp}, true
	case p.Term > cur.Term:
		return LeaderRow{NodeID: p.NodeID, Term: p.Term, ExpiresAt: exp}, true
	case cur.ExpiresAt <= now:
		return LeaderRow{NodeID: p.NodeID, Term: cur.Term + 1, ExpiresAt: exp}, true
	}
	return cur, false
}

// Result is the election's outcome as LeaderAttemptElect answers it for
// p.NodeID, given the row after ElectLeader.
func (r LeaderRow) Result(nodeID string) LeaderElectResult {
	return LeaderElectResult{Leader: r.NodeID == nodeID, LeaderID: r.NodeID, Term: r.Term, ExpiresAt: FromMillis(r.ExpiresAt)}
}

// LeaderElectResult is the outcome of an election attempt.
type LeaderElectResult struct {
	Leader    bool      // NodeID leads until ExpiresAt
	LeaderID  string    // who leads now ("" if nobody)
	Term      int64     // fencing token of the current leadership
	ExpiresAt time.Time // end of the current leader's lease
}

// ErrFenced is the error of a leader-only write (RunExpire, TaskCleanup,
// ScheduleFire) whose fencing term is not the current leadership's, or
// whose leadership's lease has passed at the write's Now: the writer was
// deposed (or resigned) and must stop acting as leader. Nothing of the
// write is applied. Test with errors.Is.
var ErrFenced = errors.New("store: fenced: this node's leadership term is no longer current")

// CheckFence decides whether a leader-only write may apply. Such a write
// carries the term of the election that made its caller leader
// (LeaderElectResult.Term, the fencing token); a backend reads the leader
// row (its term and lease end) in the transaction that applies the write,
// locked against a concurrent takeover, and refuses the whole write with
// ErrFenced unless the term is still the current one and its lease has not
// passed at the write's now. A deposed leader's late write (a paused
// process, a stalled loop) therefore changes nothing, even while the node
// still believes it leads. want 0 means unfenced: for a store used outside
// any election (tests, tools); a server always passes its term. No leader
// row (found false) fences every term.
func CheckFence(want int64, found bool, term int64, leaseEnd, now time.Time) error {
	switch {
	case want == 0:
		return nil
	case !found:
		return fmt.Errorf("%w: term %d, but nobody was ever elected", ErrFenced, want)
	case term != want:
		return fmt.Errorf("%w: term %d, the current term is %d", ErrFenced, want, term)
	case !now.Before(leaseEnd):
		return fmt.Errorf("%w: the lease of term %d ended at %s (now %s)", ErrFenced, want,
			leaseEnd.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return nil
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
// RunAt on (zero RunAt: now), or, with Events set (and no Kind), that
// events were appended to the event log.
type Notification struct {
	Kind   string
	RunAt  time.Time
	Events bool
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

// ScheduleStore stores schedules (cron and calendar plans) and fires them. It is part
// of Store (every backend implements it); it stays a separate interface so
// that the schedule engine and the HTTP executor ask only for what they use.
//
// A schedule's runs are ordinary tasks (ScheduleID, FireTime set) plus three
// schedule columns: the schedule attempt, the skip reason of SKIPPED runs
// and a triggered flag. Each (schedule, fire time) pair yields at most one
// run other than triggered ones: backends enforce it with a unique key, so
// two engines racing, or a leader change, never double-fire.
//
// Every change of a schedule row increases its Version and is a
// compare-and-set on the Version the caller read (rota.ErrConflict when it
// moved). Configuration changes (insert, update, delete) also take a new
// value of a store-wide revision counter, so that engines on any node can
// load what changed since the revision they have (ScheduleLoad).
type ScheduleStore interface {
	// ScheduleInsert stores a new schedule as given (configuration and
	// initial state, Version 1, CreatedAt = UpdatedAt = Now).
	// rota.ErrConflict when an undeleted schedule has the same name.
	ScheduleInsert(ctx context.Context, p ScheduleInsertParams) (*rota.Schedule, error)

	// ScheduleGet returns a schedule; rota.ErrNotFound if there is none (or
	// it was deleted).
	ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error)

	// ScheduleGetByName returns the schedule of that name; rota.ErrNotFound
	// if there is none.
	ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error)

	// ScheduleList returns schedules by id, newest first, starting after
	// Cursor (an id from a previous page). NextCursor is empty on the last
	// page.
	ScheduleList(ctx context.Context, p ScheduleListParams) (ScheduleListResult, error)

	// ScheduleUpdate replaces the configuration and state of the schedule
	// p.Schedule.ID with p.Schedule when its stored Version is
	// p.Schedule.Version; the stored Version becomes Version + 1 and
	// UpdatedAt Now. The caller computes the new state (see
	// schedule.Arm: edits move HighWater to the edit time so that nothing
	// fires retroactively). rota.ErrNotFound for an unknown schedule;
	// rota.ErrConflict for a stale Version or a name taken by another
	// schedule. Runs already stored are not touched.
	ScheduleUpdate(ctx context.Context, p ScheduleUpdateParams) (*rota.Schedule, error)

	// ScheduleDelete deletes a schedule. Its held runs (queued, never
	// started) end CANCELED, and so do the unstarted (SCHEDULED) runs of a
	// schedule with a target, which only the HTTP executor could run; other
	// runs stay as they are, and its runs stay listed by ScheduleRuns.
	// rota.ErrNotFound for an unknown schedule.
	ScheduleDelete(ctx context.Context, p ScheduleDeleteParams) error

	// ScheduleLoad returns the schedules whose configuration changed (were
	// inserted or updated) after revision SinceRev and the ids of those
	// deleted after it, with the current revision to pass next time.
	// SinceRev 0 loads every schedule.
	ScheduleLoad(ctx context.Context, sinceRev int64) (ScheduleLoadResult, error)

	// ScheduleFire applies engine decisions, each atomically and in its own
	// right (one item's failure does not undo another's): for each item it
	// loads the schedule and checks Version (else the item's Err is
	// rota.ErrConflict, or rota.ErrNotFound for a deleted schedule), loads
	// the schedule's live run state, calls Decide with it inside the
	// transaction, and applies the decision: inserts the new runs (ready
	// runs as SCHEDULED tasks claimable at once, held runs as SCHEDULED
	// tasks that no worker can claim until released, skipped runs directly
	// as SKIPPED tasks with EndTime = Now and their reason), releases the
	// held runs named (claimable from Now), writes the new state and
	// increases the Version. A run whose (schedule, fire time) already
	// exists is not inserted: it is reported in Duplicates and the rest of
	// the decision still applies. Tasks to cancel are only echoed in the
	// result: the caller stops them through the normal stop path. A store
	// error (not Decide's, not a conflict) fails the call and nothing of it
	// is applied. Results are in input order.
	//
	// Stores whose SupportsNotify is true notify the kinds of the tasks
	// they made claimable, as TaskInsert does. A leader duty: fenced by the
	// items' Term (ErrFenced for the whole call, nothing applied).
	ScheduleFire(ctx context.Context, ps []ScheduleFireParams) ([]ScheduleFireResult, error)

	// ScheduleTrigger inserts one triggered run (fire time Now, attempt 1,
	// outside the series and the unique key) of the schedule, claimable at
	// once, makes it the schedule's previous run (LastRunID) and increases
	// the Version. rota.ErrNotFound for an unknown schedule.
	ScheduleTrigger(ctx context.Context, p ScheduleTriggerParams) (*rota.ScheduleRun, error)

	// ScheduleRuns lists a schedule's runs newest first (by fire time, then
	// task id), optionally of one status, starting after Cursor (the
	// NextCursor of a previous page). It does not check that the schedule
	// exists.
	ScheduleRuns(ctx context.Context, p ScheduleRunsParams) (ScheduleRunsResult, error)

	// ScheduleOpenRuns returns the unfinished runs (SCHEDULED, held or not,
	// and RUNNING) of each schedule named, oldest fire first. Schedules
	// without any are absent from the map.
	ScheduleOpenRuns(ctx context.Context, scheduleIDs []string) (map[string][]rota.ScheduleRun, error)

	// ScheduleTargetKinds returns the kinds of the undeleted schedules that
	// have a Target, sorted: the kinds Rota's HTTP executor claims.
	ScheduleTargetKinds(ctx context.Context) ([]string, error)
}

// ScheduleInsertParams stores a new schedule. Validation and the initial
// state are the caller's job; the store trusts these values.
type ScheduleInsertParams struct {
	Schedule rota.Schedule // ID set; Version, CreatedAt and UpdatedAt are ignored
	Now      time.Time
}

// ScheduleListParams pages ScheduleList.
type ScheduleListParams struct {
	Cursor string // id of the last schedule of the previous page; "" = first page
	Limit  int    // 1..1000 (default 100)
	// State keeps only the schedules in that state (rota.StateError,
	// StateEnded, StatePaused, StateActive); "" keeps all.
	State string
}

// ScheduleListResult is one page of schedules.
type ScheduleListResult struct {
	Schedules  []rota.Schedule
	NextCursor string
}

// ScheduleUpdateParams replaces a schedule (compare-and-set on
// Schedule.Version).
type ScheduleUpdateParams struct {
	Schedule rota.Schedule
	Now      time.Time
}

// ScheduleDeleteParams deletes a schedule.
type ScheduleDeleteParams struct {
	ID  string
	Now time.Time
}

// ScheduleLoadResult is what changed since a revision.
type ScheduleLoadResult struct {
	Schedules []rota.Schedule // inserted or updated, undeleted
	Deleted   []string        // ids deleted
	Rev       int64           // the revision this result is current at
}

// ScheduleRunState is a schedule's live state as ScheduleFire reads it
// inside its transaction and hands to Decide.
type ScheduleRunState struct {
	Schedule rota.Schedule      // as stored (Version is the params' Version)
	Open     []rota.ScheduleRun // unfinished runs, oldest fire first (then by task id)
	Last     *rota.ScheduleRun  // the run named by Schedule.LastRunID (finished or not); nil if none
	PlanRun  *rota.ScheduleRun  // the run named by Schedule.PlanRunID; nil if none
}

// ScheduleFireParams asks ScheduleFire to apply the decision of Decide to
// one schedule, if its Version is still Version.
type ScheduleFireParams struct {
	ID      string
	Version int64
	Now     time.Time
	// Term is the engine's leadership fencing token (see CheckFence): a
	// call with any item whose Term is fenced applies nothing and fails
	// with ErrFenced. The items of one call carry the same Term.
	Term int64
	// Decide computes the decision from the live state. It runs inside the
	// store's transaction: it must be quick, do no I/O and call no store
	// method. Its error aborts the item (Err) and nothing of it is applied.
	Decide func(ScheduleRunState) (ScheduleDecision, error)
}

// ScheduleDecision is what to do to one schedule.
type ScheduleDecision struct {
	Runs    []ScheduleRunInsert // new runs, in fire order
	Release []string            // held runs to make claimable from Now
	Cancel  []string            // unfinished runs the caller will stop (echoed)
	State   rota.ScheduleState  // the state to store
	// Disable sets Enabled = false (a plan that ended).
	Disable bool
}

// ScheduleRunInsert is one new run of a decision.
type ScheduleRunInsert struct {
	TaskID   string
	FireTime time.Time
	// RunAt is when the run becomes claimable; zero means Now. The engine
	// decides fires slightly ahead of time under load and stores their runs
	// with RunAt = FireTime, so that no worker gets them early.
	RunAt     time.Time
	Attempt   int
	Held      bool            // store held back (QUEUE): claimable once released
	Skip      rota.SkipReason // non-empty: store as SKIPPED, ended at max(Now, FireTime)
	Triggered bool
	Message   string
}

// ScheduleFireResult is the outcome of one ScheduleFire item.
type ScheduleFireResult struct {
	Err        error          // rota.ErrConflict, rota.ErrNotFound or Decide's error; nothing applied
	Schedule   *rota.Schedule // after the change
	Inserted   []rota.ScheduleRun
	Duplicates []time.Time // fire times whose run already existed
	Released   []string    // held runs made claimable
	Cancel     []string    // the decision's runs to stop
}

// ScheduleTriggerParams fires a schedule once, now.
type ScheduleTriggerParams struct {
	ID     string
	TaskID string // id of the new run
	Now    time.Time
}

// ScheduleRunsParams filters and pages ScheduleRuns.
type ScheduleRunsParams struct {
	ScheduleID string
	Status     rota.Status // "" = any
	Cursor     string      // NextCursor of the previous page; "" = first page
	Limit      int         // 1..1000 (default 100)
}

// ScheduleRunsResult is one page of runs.
type ScheduleRunsResult struct {
	Runs       []rota.ScheduleRun
	NextCursor string
}

// RateRefill returns the tokens of a kind's bucket at now (unix ms): tokens
// left at the last claim (at, unix ms; 0 = never: a full bucket) plus the
// refill at rate per second, capped at the burst of max(1, rate). Backends
// share it so that they agree.
func RateRefill(rate, tokens float64, at, now int64) float64 {
	burst := max(1, rate)
	if at == 0 {
		return burst
	}
	return min(burst, tokens+rate*float64(now-at)/1000)
}

// RateWait is how long until a bucket holding tokens (< 1) has a whole one.
func RateWait(rate, tokens float64) time.Duration {
	return time.Duration((1-tokens)/rate*float64(time.Second)).Round(time.Millisecond) + time.Millisecond
}
