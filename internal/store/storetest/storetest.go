// Package storetest is the conformance suite of store.Store. Every backend's
// test file only says how to open a fresh store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(tb testing.TB) store.Store { return openTemp(tb) })
//	}
//
//	func BenchmarkStore(b *testing.B) {
//		storetest.Benchmark(b, func(tb testing.TB) store.Store { return openTemp(tb) })
//	}
//
// Time is an input everywhere: the suite drives the store with explicit Now
// values derived from a fixed base instant (2026-01-01T00:00:00Z), never the
// wall clock, and never sleeps. Instants are compared after truncation to
// the millisecond, the precision every backend must keep.
//
// A behaviour change of the contract extends this suite, not one backend's
// tests. The suite is split by area: insert.go (insert, get, list,
// idempotency), claim.go (state machine, delays), lease.go (leases, fencing,
// timeouts), priority.go (weighted rounds, kinds order, pinning), multi.go
// (multi-worker tasks), stop.go (stop and update), kind.go, worker.go,
// stats.go, concurrency.go, cluster.go, limits.go, schedules.go and bench.go.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// newStoreFunc opens a fresh, empty, isolated store and registers its
// cleanup on tb.
type newStoreFunc = func(tb testing.TB) store.Store

// Run runs the conformance suite against fresh stores made by newStore. Each
// call of newStore must return an empty store isolated from every other one;
// newStore registers the backend's cleanup on the tb it is given. Every
// subtest calls t.Parallel and opens its own store.
func Run(t *testing.T, newStore func(tb testing.TB) store.Store) {
	areas := []struct {
		name string
		run  func(t *testing.T, ns newStoreFunc)
	}{
		{"TaskInsert", testTaskInsert},
		{"TaskList", testTaskList},
		{"Idempotency", testIdempotency},
		{"StateMachine", testStateMachine},
		{"Lease", testLease},
		{"Timeout", testTimeout},
		{"Priority", testPriority},
		{"Pinning", testPinning},
		{"MultiWorker", testMultiWorker},
		{"Delay", testDelay},
		{"Stop", testStop},
		{"Update", testUpdate},
		{"Kind", testKind},
		{"Worker", testWorker},
		{"WorkerPage", testWorkerPage},
		{"Stats", testStats},
		{"Concurrency", testConcurrency},
		{"Cluster", testCluster},
		{"Fencing", testFencing},
		{"Protocol", testProtocol},
		{"Limits", testLimits},
		{"ScheduleCRUD", testScheduleCRUD},
		{"ScheduleLoad", testScheduleLoad},
		{"ScheduleFire", testScheduleFire},
		{"ScheduleRuns", testScheduleRuns},
		{"ScheduleExt", testScheduleExt},
		{"Access", testAccess},
		{"Events", testEvents},
		{"Deps", testDeps},
		{"TaskListMore", testTaskListMore},
		{"Push", testPush},
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			a.run(t, newStore)
		})
	}
}

// parallel runs fn as a parallel subtest of t, on a fixture over a fresh
// store.
func parallel(t *testing.T, ns newStoreFunc, name string, fn func(t *testing.T, f *Fixture)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, NewFixture(t, ns(t)))
	})
}

// kindK is the kind of tests that need only one.
const kindK = "k"

// Fixture is a store with a fake timeline and id generators, plus helpers
// that fail the test on unexpected errors. Times are Base plus offsets
// chosen by the test (At); ids come from rota.IDGenerator, so task ids made
// at increasing instants sort in creation order.
//
// A Fixture must not be copied. Its helpers call TB.Fatal, so use them from
// the test's goroutine only; NewRunID is safe for concurrent use.
type Fixture struct {
	TB    testing.TB
	Store store.Store
	Base  time.Time // 2026-01-01T00:00:00Z

	taskIDs rota.IDGenerator
	runIDs  rota.IDGenerator

	mu     sync.Mutex
	issued map[string]bool // run ids handed out by NewRunID
}

// NewFixture wraps st for tb.
func NewFixture(tb testing.TB, st store.Store) *Fixture {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Fixture{TB: tb, Store: st, Base: base, issued: make(map[string]bool)}
}

// Ctx is the context of every store call: the test's.
func (f *Fixture) Ctx() context.Context { return f.TB.Context() }

// At returns Base + d.
func (f *Fixture) At(d time.Duration) time.Time { return f.Base.Add(d) }

// NewTaskID returns a new task id for a task created at now.
func (f *Fixture) NewTaskID(now time.Time) string { return f.taskIDs.New(now) }

// NewRunID returns a new run id; pass it as TaskClaimParams.NewRunID. It
// remembers the ids it made (see Issued).
func (f *Fixture) NewRunID() string {
	id := f.runIDs.New(f.Base)
	f.mu.Lock()
	f.issued[id] = true
	f.mu.Unlock()
	return id
}

// Issued reports whether NewRunID made id.
func (f *Fixture) Issued(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued[id]
}

// Params returns insert params for a new task of kind created at now with
// the suite's defaults: priority mid, payload {"n":1}, RunAt now, MaxRetries
// 3, HeartbeatTimeoutSeconds 30, Workers 1, no timeout, no key.
func (f *Fixture) Params(kind string, now time.Time) store.TaskInsertParams {
	return store.TaskInsertParams{
		ID:                      f.NewTaskID(now),
		Kind:                    kind,
		Priority:                rota.PriorityMid,
		Payload:                 json.RawMessage(`{"n":1}`),
		RunAt:                   now,
		MaxRetries:              store.DefaultMaxRetries,
		HeartbeatTimeoutSeconds: store.DefaultHeartbeatTimeout,
		Workers:                 1,
		Now:                     now,
	}
}

// Insert inserts p and returns the stored task; it fails the test on error.
func (f *Fixture) Insert(p store.TaskInsertParams) *rota.Task {
	f.TB.Helper()
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		f.TB.Fatalf("TaskInsert(kind %q, key %q): %v", p.Kind, p.Key, err)
	}
	if res.Task == nil {
		f.TB.Fatalf("TaskInsert(kind %q, key %q): nil task", p.Kind, p.Key)
	}
	return res.Task
}

// InsertNew inserts a task of kind with default params at now.
func (f *Fixture) InsertNew(kind string, now time.Time) *rota.Task {
	f.TB.Helper()
	return f.Insert(f.Params(kind, now))
}

// Get returns a task with its runs; it fails the test on error.
func (f *Fixture) Get(id string) *rota.Task {
	f.TB.Helper()
	task, err := f.Store.TaskGet(f.Ctx(), id)
	if err != nil {
		f.TB.Fatalf("TaskGet(%s): %v", id, err)
	}
	return task
}

// Addr is the address the fixture's claims give for worker w.
func Addr(w string) string { return w + ".example:7070" }

// Claim claims up to n tasks of kinds for worker at now (address Addr(w),
// no wait); it fails the test on error.
func (f *Fixture) Claim(worker string, now time.Time, n int, kinds ...string) store.TaskClaimResult {
	f.TB.Helper()
	res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{
		WorkerID:      worker,
		WorkerAddress: Addr(worker),
		Kinds:         kinds,
		Max:           n,
		Now:           now,
		NewRunID:      f.NewRunID,
	})
	if err != nil {
		f.TB.Fatalf("TaskClaim(worker %s, kinds %v, max %d) at %s: %v", worker, kinds, n, f.rel(now), err)
	}
	if len(res.Runs) > n {
		f.TB.Fatalf("TaskClaim(worker %s, max %d) handed out %d runs", worker, n, len(res.Runs))
	}
	return res
}

// ClaimOne claims exactly one task of kind for worker at now.
func (f *Fixture) ClaimOne(worker string, now time.Time, kind string) rota.ClaimedRun {
	f.TB.Helper()
	res := f.Claim(worker, now, 1, kind)
	if len(res.Runs) != 1 {
		f.TB.Fatalf("TaskClaim(worker %s, kind %s) at %s: got %d runs, want 1 (drain %v)", worker, kind, f.rel(now), len(res.Runs), res.Drain)
	}
	return res.Runs[0]
}

// ClaimNone asserts that worker gets nothing of kinds at now.
func (f *Fixture) ClaimNone(worker string, now time.Time, kinds ...string) {
	f.TB.Helper()
	res := f.Claim(worker, now, 10, kinds...)
	if len(res.Runs) != 0 {
		ids := make([]string, len(res.Runs))
		for i, r := range res.Runs {
			ids[i] = r.TaskID
		}
		f.TB.Fatalf("TaskClaim(worker %s, kinds %v) at %s: got tasks %v, want none", worker, kinds, f.rel(now), ids)
	}
}

// Heartbeat renews a run's lease; it fails the test on error.
func (f *Fixture) Heartbeat(worker, runID string, now time.Time) store.RunHeartbeatResult {
	f.TB.Helper()
	res, err := f.Store.RunHeartbeat(f.Ctx(), store.RunHeartbeatParams{RunID: runID, WorkerID: worker, Now: now})
	if err != nil {
		f.TB.Fatalf("RunHeartbeat(run %s, worker %s) at %s: %v", runID, worker, f.rel(now), err)
	}
	return res
}

// Complete reports p; it fails the test on error.
func (f *Fixture) Complete(p store.RunCompleteParams) *rota.Task {
	f.TB.Helper()
	task, err := f.Store.RunComplete(f.Ctx(), p)
	if err != nil {
		f.TB.Fatalf("RunComplete(run %s, worker %s, success %v) at %s: %v", p.RunID, p.WorkerID, p.Success, f.rel(p.Now), err)
	}
	return task
}

// Succeed reports success of worker's run at now, with message "done".
func (f *Fixture) Succeed(worker, runID string, now time.Time) *rota.Task {
	f.TB.Helper()
	return f.Complete(store.RunCompleteParams{RunID: runID, WorkerID: worker, Success: true, Message: "done", Now: now})
}

// CycleAlone inserts, claims (as worker) and completes n tasks of kind one
// at a time, at now, and checks that each report's answer (made in memory
// by the lean stores) is the task as stored.
func (f *Fixture) CycleAlone(kind, worker string, now time.Time, n int) {
	f.TB.Helper()
	for range n {
		f.InsertNew(kind, now)
		answer := f.Succeed(worker, f.ClaimOne(worker, now, kind).RunID, now)
		if d := cmp.Diff(f.Get(answer.ID), answer); d != "" {
			f.TB.Fatalf("answer to a report differs from the task read (-read +answer):\n%s", d)
		}
	}
}

// InsertClaimMany inserts n tasks of kind in one TaskInsertMany at now and
// claims them all (as worker) in one claim, failing the test unless n
// come, and returns the runs.
func (f *Fixture) InsertClaimMany(kind, worker string, now time.Time, n int) []rota.ClaimedRun {
	f.TB.Helper()
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = f.Params(kind, now)
	}
	if _, err := f.Store.TaskInsertMany(f.Ctx(), ps); err != nil {
		f.TB.Fatal(err)
	}
	runs := f.Claim(worker, now, n, kind).Runs
	if len(runs) != n {
		f.TB.Fatalf("claimed %d, want %d", len(runs), n)
	}
	return runs
}

// Fail reports a retryable failure of worker's run at now, with message
// "boom" and the given backoff.
func (f *Fixture) Fail(worker, runID string, now time.Time, backoff func(int) time.Duration) *rota.Task {
	f.TB.Helper()
	return f.Complete(store.RunCompleteParams{RunID: runID, WorkerID: worker, Message: "boom", Retry: true, Now: now, Backoff: backoff})
}

// Expire runs the reaper at now (limit 1000, backoff 7s·n); it fails the
// test on error.
func (f *Fixture) Expire(now time.Time) store.RunExpireResult {
	f.TB.Helper()
	res, err := f.Store.RunExpire(f.Ctx(), store.RunExpireParams{Now: now, Limit: 1000, Backoff: backoff7})
	if err != nil {
		f.TB.Fatalf("RunExpire at %s: %v", f.rel(now), err)
	}
	return res
}

// List returns one page of TaskList; it fails the test on error.
func (f *Fixture) List(p store.TaskListParams) store.TaskListResult {
	f.TB.Helper()
	res, err := f.Store.TaskList(f.Ctx(), p)
	if err != nil {
		f.TB.Fatalf("TaskList(%+v): %v", p, err)
	}
	return res
}

// ListAll pages through TaskList with limit 1000 and returns every task.
func (f *Fixture) ListAll(p store.TaskListParams) []rota.Task {
	f.TB.Helper()
	p.Limit = 1000
	var all []rota.Task
	for range 1000 {
		res := f.List(p)
		all = append(all, res.Tasks...)
		if res.NextCursor == "" {
			return all
		}
		p.Cursor = res.NextCursor
	}
	f.TB.Fatalf("TaskList(%+v): pagination does not end", p)
	return nil
}

// rel renders an instant relative to Base, for messages.
func (f *Fixture) rel(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return "base+" + t.Sub(f.Base).String()
}

// backoff7 is the deterministic backoff of the suite: 7s per failed run so
// far, so the retry instant also tells which n the store passed.
func backoff7(n int) time.Duration { return time.Duration(n) * 7 * time.Second }

// sec is n seconds.
func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// --- comparisons ---------------------------------------------------------

// sameInstant reports whether a and b are the same instant at millisecond
// precision (zero equals zero only).
func sameInstant(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

// jsonEqual reports whether a and b are the same JSON value (key order and
// white space aside).
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return bytes.Equal(a, b)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return false
	}
	return cmp.Equal(va, vb)
}

// cmpOpts compares domain values as stored: instants at millisecond
// precision, JSON semantically, nil and empty slices alike, and the string
// sets WorkerIDs (of tasks) and Kinds (of workers) regardless of order.
func cmpOpts() cmp.Option {
	return cmp.Options{
		cmp.Comparer(sameInstant),
		cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 }, cmp.Comparer(jsonEqual)),
		cmpopts.EquateEmpty(),
		cmp.FilterPath(func(p cmp.Path) bool {
			sf, ok := p.Last().(cmp.StructField)
			return ok && (sf.Name() == "WorkerIDs" || sf.Name() == "Kinds")
		}, cmpopts.SortSlices(func(a, b string) bool { return a < b })),
	}
}

// diff fails the test when want and got differ.
func diff(tb testing.TB, what string, want, got any) {
	tb.Helper()
	if d := cmp.Diff(want, got, cmpOpts()); d != "" {
		tb.Fatalf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(tb testing.TB, what string, err, target error) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("%s: no error, want %v", what, target)
	}
	if !errors.Is(err, target) {
		tb.Fatalf("%s: err = %v (code %s), want errors.Is %v", what, err, rota.ErrorCode(err), target)
	}
}

// wantStatus fails the test unless task has status s.
func wantStatus(tb testing.TB, task *rota.Task, s rota.Status) {
	tb.Helper()
	if task.Status != s {
		tb.Fatalf("task %s: status %s, want %s (message %q)", task.ID, task.Status, s, task.Message)
	}
}

// wantInstant fails the test unless got and want are the same instant.
func wantInstant(tb testing.TB, what string, got, want time.Time) {
	tb.Helper()
	if !sameInstant(got, want) {
		tb.Fatalf("%s = %v, want %v (off by %v)", what, got, want, got.Sub(want))
	}
}

// runByID returns the run with id among task's runs.
func runByID(tb testing.TB, task *rota.Task, id string) rota.Run {
	tb.Helper()
	for _, r := range task.Runs {
		if r.ID == id {
			return r
		}
	}
	tb.Fatalf("task %s has no run %s (runs %s)", task.ID, id, runsString(task))
	return rota.Run{}
}

// runsString renders a task's runs for messages.
func runsString(task *rota.Task) string {
	parts := make([]string, len(task.Runs))
	for i, r := range task.Runs {
		parts[i] = fmt.Sprintf("%s@%s#%d:%s", r.ID, r.WorkerID, r.Attempt, r.Status)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// countRuns counts task's runs in status s.
func countRuns(task *rota.Task, s rota.Status) int {
	n := 0
	for _, r := range task.Runs {
		if r.Status == s {
			n++
		}
	}
	return n
}

// ids returns the ids of tasks.
func ids(tasks []rota.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// sorted returns a sorted copy of ss.
func sorted(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

// msec is n milliseconds.
func msec(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// WantNewerSchemaRefused fails tb unless err is a backend's refusal to open
// a schema that a newer rota migrated: the error must say to upgrade rota.
func WantNewerSchemaRefused(tb testing.TB, err error) {
	tb.Helper()
	if err == nil || !strings.Contains(err.Error(), "upgrade rota") {
		tb.Fatalf("New on a newer schema: err = %v, want a refusal that says to upgrade", err)
	}
}

// CheckableStore is a store.Store with the backends' invariant check.
type CheckableStore interface {
	store.Store
	Check(ctx context.Context) error
}

// WantKeysHeldAfterMigration checks st, just migrated to keys held by
// finished tasks from data where kind "k" had tasks t1 (finished), t2
// (unfinished) and t3 (finished, newest) with key "a", and u1 (finished)
// and u2 (finished, newest) with key "b": the invariants hold, the
// unfinished task holds its key, or else the newest, and every task keeps
// its key for listing.
func WantKeysHeldAfterMigration(t *testing.T, st CheckableStore) {
	t.Helper()
	ctx := t.Context()
	if err := st.Check(ctx); err != nil {
		t.Fatalf("Check after the migration: %v", err)
	}
	f := NewFixture(t, st)
	for key, want := range map[string]string{"a": "t2", "b": "u2"} {
		p := f.Params("k", f.At(0))
		p.Key = key
		res, err := st.TaskInsert(ctx, p)
		if err != nil || !res.Existing || res.Task.ID != want {
			t.Fatalf("insert of key %s after the migration: err %v existing %v task %+v; want existing %s", key, err, res.Existing, res.Task, want)
		}
	}
	res, err := st.TaskList(ctx, store.TaskListParams{Key: "a", Limit: 10})
	if err != nil || len(res.Tasks) != 3 {
		t.Fatalf("tasks listed with key a: %d, %v; want 3", len(res.Tasks), err)
	}
}
