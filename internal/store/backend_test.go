package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func TestMillis(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 1, 1, 1, 2, 3, 456789000, time.FixedZone("X", 3600))
	if got := store.Millis(time.Time{}); got != 0 {
		t.Errorf("Millis(zero) = %d, want 0", got)
	}
	if got := store.FromMillis(0); !got.IsZero() {
		t.Errorf("FromMillis(0) = %v, want the zero time", got)
	}
	got := store.FromMillis(store.Millis(local))
	want := local.Truncate(time.Millisecond).UTC()
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("round trip of %v = %v, want %v in UTC", local, got, want)
	}
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		target error
		msg    string
	}{
		{store.NotFoundError("task", "t1"), rota.ErrNotFound, "task t1 not found"},
		{store.ConflictError("task %s is %s", "t1", "DONE"), rota.ErrConflict, "task t1 is DONE"},
		{store.LeaseLostError("r1", "it expired"), rota.ErrLeaseLost, "run r1 is no longer held by this worker: it expired"},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.target) || !strings.Contains(c.err.Error(), c.msg) {
			t.Errorf("%v: want errors.Is %v and message %q", c.err, c.target, c.msg)
		}
	}
}

// rowScanner scans a row of fixed values into the destinations it is
// given, as a driver would.
type rowScanner []any

func (r rowScanner) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("%d destinations for %d columns", len(dest), len(r))
	}
	for i, v := range r {
		switch d := dest[i].(type) {
		case *string:
			*d = v.(string)
		case **string:
			if v != nil {
				s := v.(string)
				*d = &s
			}
		case *int:
			*d = v.(int)
		case *int64:
			*d = v.(int64)
		case *bool:
			*d = v.(bool)
		case *[]byte:
			if v != nil {
				*d = []byte(v.(string))
			}
		case *rota.Status:
			*d = rota.Status(v.(string))
		case *[]string:
			*d = v.([]string)
		default:
			return fmt.Errorf("column %d: destination %T", i, dest[i])
		}
	}
	return nil
}

func TestTaskScan(t *testing.T) {
	t.Parallel()
	if n := len(strings.Split(store.TaskColumns, ",")); n != len(new(store.TaskScan).Dest(nil)) {
		t.Fatalf("TaskColumns has %d columns, Dest %d destinations", n, len(new(store.TaskScan).Dest(nil)))
	}
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	ms := func(s int) int64 { return at(s).UnixMilli() }
	row := rowScanner{"t1", "email", 1, `{"a":1}`, "k1", "SUCCESS", true, false, 2, 1, 1, 0,
		3, 1, []string{"w1"}, 60, 30, true, ms(1), ms(2), ms(3), ms(4), "w1:7070", "ok", `{"r":2}`, "s1", int64(0)}
	var sc store.TaskScan
	var ids []string
	var extra int
	if err := row.Scan(sc.Dest(&ids)...); err != nil {
		t.Fatal(err)
	}
	got := sc.Row(ids)
	want := store.TaskRow{
		Task: rota.Task{
			ID: "t1", Kind: "email", Priority: rota.PriorityMid, Payload: json.RawMessage(`{"a":1}`), Key: "k1",
			Status: rota.StatusSuccess, Attempt: 2, MaxRetries: 3, Workers: 1, WorkerIDs: []string{"w1"},
			TimeoutSeconds: 60, HeartbeatTimeoutSeconds: 30, CreatedAt: at(1), RunAt: at(2), StartTime: at(3),
			EndTime: at(4), WorkerAddress: "w1:7070", Message: "ok", Result: json.RawMessage(`{"r":2}`),
			ScheduleID: "s1", IsSucceed: true,
		},
		Done: true, StopRequested: true, Failures: 1, Successes: 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TaskScan row (-want +got):\n%s", diff)
	}

	// NULL key, result and worker ids; an extra column after them.
	row = rowScanner{"t2", "email", 2, `{}`, nil, "SCHEDULED", false, true, 0, 0, 0, 0,
		0, 1, []string(nil), 0, 30, false, ms(1), ms(1), int64(0), int64(0), "", "", nil, "", int64(0), 7}
	sc = store.TaskScan{}
	if err := row.Scan(sc.Dest(&ids, &extra)...); err != nil {
		t.Fatal(err)
	}
	got = sc.Row(nil)
	if got.Key != "" || got.Result != nil || got.WorkerIDs != nil || !got.StartTime.IsZero() || extra != 7 ||
		got.Priority != rota.PriorityLow || !got.Avail || got.IsSucceed {
		t.Errorf("row with NULLs: %+v, extra %d", got, extra)
	}
}

func TestRunScan(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	ms := func(s int) int64 { return at(s).UnixMilli() }
	if n := len(strings.Split(store.RunColumns, ",")); n != len(new(store.RunScan).Dest()) {
		t.Fatalf("RunColumns has %d columns, Dest %d destinations", n, len(new(store.RunScan).Dest()))
	}
	var sc store.RunScan
	var kind string
	row := rowScanner{"r1", "t1", "w1", "w1:7070", 2, "RUNNING", ms(1), int64(0), ms(31), ms(61), true, "", "email"}
	if err := row.Scan(sc.Dest(&kind)...); err != nil {
		t.Fatal(err)
	}
	want := rota.Run{ID: "r1", TaskID: "t1", WorkerID: "w1", WorkerAddress: "w1:7070", Attempt: 2,
		Status: rota.StatusRunning, StartTime: at(1), LeaseExpiresAt: at(31), Deadline: at(61), StopRequested: true}
	if diff := cmp.Diff(want, sc.Run()); diff != "" || kind != "email" {
		t.Errorf("RunScan run (-want +got):\n%s; kind %q", diff, kind)
	}
}

func TestTaskListQuery(t *testing.T) {
	t.Parallel()
	dollar := func(n int) string { return "$" + strconv.Itoa(n) }
	cases := []struct {
		p     store.TaskListParams
		where string
		args  []any
		limit int
	}{
		{store.TaskListParams{}, " ORDER BY id DESC LIMIT $1", []any{101}, 100},
		{store.TaskListParams{Kind: "a", Status: rota.StatusFailed, Key: "k", Cursor: "c9", Limit: 5},
			` WHERE kind = $1 AND status = $2 AND "key" = $3 AND id < $4 ORDER BY id DESC LIMIT $5`,
			[]any{"a", "FAILED", "k", "c9", 6}, 5},
		{store.TaskListParams{Key: "k", Limit: -1}, ` WHERE "key" = $1 ORDER BY id DESC LIMIT $2`, []any{"k", 101}, 100},
	}
	for _, c := range cases {
		q, args, limit := store.TaskListQuery(c.p, dollar)
		want := "SELECT " + store.TaskColumns + " FROM tasks" + c.where
		if q != want || limit != c.limit {
			t.Errorf("%+v: query %q limit %d, want %q limit %d", c.p, q, limit, want, c.limit)
		}
		if diff := cmp.Diff(c.args, args); diff != "" {
			t.Errorf("%+v: args (-want +got):\n%s", c.p, diff)
		}
	}
	q, _, _ := store.TaskListQuery(store.TaskListParams{Kind: "a"}, func(int) string { return "?" })
	if !strings.HasSuffix(q, " WHERE kind = ? ORDER BY id DESC LIMIT ?") {
		t.Errorf("query with ? placeholders: %q", q)
	}
}

func TestTaskListPage(t *testing.T) {
	t.Parallel()
	tasks := func(ids ...string) []rota.Task {
		var out []rota.Task
		for _, id := range ids {
			out = append(out, rota.Task{ID: id})
		}
		return out
	}
	cases := []struct {
		rows       []rota.Task
		limit      int
		want       []rota.Task
		nextCursor string
	}{
		{nil, 2, nil, ""},
		{tasks("c", "b"), 2, tasks("c", "b"), ""},
		{tasks("c", "b", "a"), 2, tasks("c", "b"), "b"},
		{tasks("c", "b"), 1, tasks("c"), "c"},
	}
	for _, c := range cases {
		got := store.TaskListPage(c.rows, c.limit)
		if diff := cmp.Diff(store.TaskListResult{Tasks: c.want, NextCursor: c.nextCursor}, got); diff != "" {
			t.Errorf("page of %d rows, limit %d (-want +got):\n%s", len(c.rows), c.limit, diff)
		}
	}
}

func TestTaskUpdateApplyTo(t *testing.T) {
	t.Parallel()
	high, three, nine := rota.PriorityHigh, 3, 9
	ids := []string{"w2"}
	none := []string{}
	base := func() store.TaskRow {
		return store.TaskRow{Task: rota.Task{ID: "t1", Priority: rota.PriorityLow, MaxRetries: 1,
			HeartbeatTimeoutSeconds: 30, WorkerIDs: []string{"w1"}}}
	}
	cases := []struct {
		name     string
		p        store.TaskUpdateParams
		want     func(*rota.Task)
		wantStop bool
	}{
		{"nothing", store.TaskUpdateParams{}, func(*rota.Task) {}, false},
		{"all", store.TaskUpdateParams{Priority: &high, MaxRetries: &three, HeartbeatTimeoutSeconds: &nine, WorkerIDs: &ids},
			func(t *rota.Task) {
				t.Priority, t.MaxRetries, t.HeartbeatTimeoutSeconds, t.WorkerIDs = high, 3, 9, []string{"w2"}
			}, true},
		{"any worker", store.TaskUpdateParams{WorkerIDs: &none}, func(t *rota.Task) { t.WorkerIDs = nil }, false},
	}
	for _, c := range cases {
		row := base()
		stop, err := c.p.ApplyTo(&row)
		want := base()
		c.want(&want.Task)
		if err != nil || stop != c.wantStop {
			t.Errorf("%s: stop %v err %v, want stop %v", c.name, stop, err, c.wantStop)
		}
		if diff := cmp.Diff(want, row); diff != "" {
			t.Errorf("%s: task (-want +got):\n%s", c.name, diff)
		}
	}
	ids[0] = "changed"
	row := base()
	if _, err := (store.TaskUpdateParams{WorkerIDs: &ids}).ApplyTo(&row); err != nil || row.WorkerIDs[0] != "changed" {
		t.Fatalf("ApplyTo: %v %v", row.WorkerIDs, err)
	}
	ids[0] = "later"
	if row.WorkerIDs[0] != "changed" {
		t.Errorf("ApplyTo shares the caller's worker ids")
	}
	row.Done, row.Status = true, rota.StatusSuccess
	if _, err := (store.TaskUpdateParams{Priority: &high}).ApplyTo(&row); !errors.Is(err, rota.ErrConflict) || row.Priority == high {
		t.Errorf("ApplyTo of a finished task: err %v priority %v, want conflict and no change", err, row.Priority)
	}
}

func TestTaskStopMessageFor(t *testing.T) {
	t.Parallel()
	row := store.TaskRow{Task: rota.Task{ID: "t1", Status: rota.StatusRunning}}
	if msg, err := (store.TaskStopParams{}).MessageFor(&row); err != nil || msg != store.DefaultStopMessage {
		t.Errorf("MessageFor without message = %q, %v", msg, err)
	}
	if msg, err := (store.TaskStopParams{Message: "by op"}).MessageFor(&row); err != nil || msg != "by op" {
		t.Errorf("MessageFor = %q, %v", msg, err)
	}
	row.Done, row.Status = true, rota.StatusFailed
	if _, err := (store.TaskStopParams{}).MessageFor(&row); !errors.Is(err, rota.ErrConflict) ||
		!strings.Contains(err.Error(), "already FAILED") {
		t.Errorf("MessageFor of a finished task: %v, want a conflict", err)
	}
}

func TestRunExpireResultAdd(t *testing.T) {
	t.Parallel()
	var r store.RunExpireResult
	for _, e := range [][2]string{{"t1", "a"}, {"t2", "b"}, {"t3", "a"}, {"t1", "c"}} {
		r.Add(e[0], e[1])
	}
	want := store.RunExpireResult{Expired: 4, Tasks: []string{"t1", "t2", "t3", "t1"}, Kinds: []string{"a", "b", "c"}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("RunExpireResult (-want +got):\n%s", diff)
	}
}

func TestCheckInvariants(t *testing.T) {
	t.Parallel()
	invs := []store.Invariant{{What: "a broken", Query: "qa"}, {What: "b holds", Query: "qb"}, {What: "c broken", Query: "qc"}}
	found := map[string][]string{"qa": {"t1", "t2"}, "qc": {"t9"}}
	err := store.CheckInvariants(invs, func(q string) ([]string, error) { return found[q], nil })
	if err == nil || err.Error() != "a broken: [t1 t2]\nc broken: [t9]" {
		t.Errorf("CheckInvariants = %v", err)
	}
	if err := store.CheckInvariants(invs, func(string) ([]string, error) { return nil, nil }); err != nil {
		t.Errorf("CheckInvariants of a consistent store = %v", err)
	}
	boom := errors.New("boom")
	err = store.CheckInvariants(invs, func(string) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "a broken") {
		t.Errorf("CheckInvariants with a failing query = %v", err)
	}
	if len(store.TaskInvariants()) == 0 {
		t.Error("no shared invariants")
	}
}

func TestClaimCandidateStart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC).UnixMilli()
	c := store.ClaimCandidate{ID: "t1", Payload: []byte(`{"a":1}`), Level: 0, Attempt: 2, TimeoutSeconds: 60,
		HeartbeatTimeoutSeconds: 30, RunAt: now - 5000}
	run, lease, deadline := c.Start("email", "r1", now)
	want := rota.ClaimedRun{TaskID: "t1", RunID: "r1", Kind: "email", Priority: rota.PriorityHigh,
		Payload: json.RawMessage(`{"a":1}`), Attempt: 3, HeartbeatTimeoutSeconds: 30, TimeoutSeconds: 60,
		LeaseExpiresAt: store.FromMillis(now + 30000), RunAt: store.FromMillis(now - 5000)}
	if diff := cmp.Diff(want, run); diff != "" || lease != now+30000 || deadline != now+60000 {
		t.Errorf("Start (-want +got):\n%s lease %d deadline %d", diff, lease, deadline)
	}
	c.TimeoutSeconds = 0
	if _, _, deadline := c.Start("email", "r2", now); deadline != 0 {
		t.Errorf("deadline without a timeout = %d, want 0", deadline)
	}
}

func TestTaskClaimResultRateLimit(t *testing.T) {
	t.Parallel()
	var r store.TaskClaimResult
	r.RateLimit(0)
	if !r.RateLimitedUntil.IsZero() {
		t.Fatalf("RateLimit(0) set %v", r.RateLimitedUntil)
	}
	for _, until := range []int64{5000, 3000, 0, 4000} {
		r.RateLimit(until)
	}
	if got := store.Millis(r.RateLimitedUntil); got != 3000 {
		t.Errorf("RateLimitedUntil = %d ms, want the earliest, 3000", got)
	}
}

func TestReportSettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 123456789, time.Local)
	backoff := func(n int) time.Duration { return time.Second }
	cases := []struct {
		name    string
		p       store.RunCompleteParams
		stop    bool
		status  rota.Status
		outcome store.RunOutcome
	}{
		{"success", store.RunCompleteParams{Success: true}, false, rota.StatusSuccess, store.OutcomeSuccess},
		{"failure", store.RunCompleteParams{}, false, rota.StatusFailed, store.OutcomeFailure},
		{"release", store.RunCompleteParams{Release: true, Success: true}, false, rota.StatusCanceled, store.OutcomeReleased},
		{"success of a stopped run", store.RunCompleteParams{Success: true}, true, rota.StatusCanceled, store.OutcomeSuccess},
		{"failure of a stopped run", store.RunCompleteParams{Retry: true}, true, rota.StatusCanceled, store.OutcomeFailure},
	}
	for _, c := range cases {
		c.p.Now, c.p.Message, c.p.Result, c.p.Backoff = now, "msg", json.RawMessage(`1`), backoff
		status, run := store.ReportSettle(c.p, c.stop)
		if status != c.status || run.Outcome != c.outcome || run.StopRequested != c.stop || run.Message != "msg" ||
			string(run.Result) != "1" || run.Retry != c.p.Retry || run.Backoff == nil {
			t.Errorf("%s: status %s, %+v", c.name, status, run)
		}
		if want := now.Truncate(time.Millisecond).UTC(); !run.Now.Equal(want) || run.Now.Location() != time.UTC {
			t.Errorf("%s: Now %v, want %v in UTC", c.name, run.Now, want)
		}
	}
}

func TestExpirySettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	cases := []struct {
		deadline time.Time
		outcome  store.RunOutcome
		msg      string
	}{
		{time.Time{}, store.OutcomeLeaseLapsed, "lease expired: no heartbeat in time"},
		{now.Add(time.Second), store.OutcomeLeaseLapsed, "lease expired: no heartbeat in time"},
		{now, store.OutcomeDeadlinePassed, "timeout: the run exceeded its time limit"},
		{now.Add(-time.Second), store.OutcomeDeadlinePassed, "timeout: the run exceeded its time limit"},
	}
	for _, c := range cases {
		msg, run := store.ExpirySettle(c.deadline, now, true, nil)
		if msg != c.msg || run.Outcome != c.outcome || !run.StopRequested || !run.Now.Equal(now) || run.Message != "" {
			t.Errorf("deadline %v: %q %+v, want %q outcome %v", c.deadline, msg, run, c.msg, c.outcome)
		}
	}
}

func TestRunExpiresAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ lease, deadline, want int64 }{{100, 0, 100}, {100, 50, 50}, {100, 150, 100}, {100, 100, 100}} {
		if got := store.RunExpiresAt(c.lease, c.deadline); got != c.want {
			t.Errorf("RunExpiresAt(%d, %d) = %d, want %d", c.lease, c.deadline, got, c.want)
		}
	}
}

func TestTaskRowSettle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	row := store.TaskRow{Task: rota.Task{ID: "t1", Status: rota.StatusRunning, Workers: 1, MaxRetries: 0}}
	st := row.Settle(store.SettleRun{Outcome: store.OutcomeSuccess, Message: "ok", Result: json.RawMessage(`2`), Now: now})
	if !row.Done || row.Avail || row.Successes != 1 || row.Status != rota.StatusSuccess || !row.IsSucceed ||
		!row.EndTime.Equal(now) || row.Message != "ok" || string(row.Result) != "2" {
		t.Errorf("row after a success: %+v", row)
	}
	if st.Status != row.Status || st.StopOthers {
		t.Errorf("Settled %+v", st)
	}
}
