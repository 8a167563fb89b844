package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// leanOldVersion is the schema version before 0009_lean (runs a table of
// its own, no run in the task row).
const leanOldVersion = 8

// TestMigrateLean opens a database written by the schema before the lean
// store (issue 13) with the new code: its tasks and runs are kept, a run
// running at the upgrade keeps its fencing (it heartbeats and reports, a
// stranger's report is refused), one whose lease lapsed is expired and
// retried, a retried task's new run goes to its row after the old ones, a
// multi-worker task finishes, and a dependent is released by the trigger
// (its parent's dependents count was set by the migration).
func TestMigrateLean(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	if err := pgstore.MigrateTo(ctx, testURL(), schema, leanOldVersion); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`;`+oldLeanData); err != nil {
		t.Fatal(err)
	}
	st := openSchema(t, schema, "n1")
	f := storetest.NewFixture(t, st)
	if err := st.Check(ctx); err != nil {
		t.Fatalf("Check after the migration: %v", err)
	}
	wantRuns(t, f, lid("a"), "00a:RUNNING")
	wantRuns(t, f, lid("b"), "00b:SUCCESS")
	wantRuns(t, f, lid("c"), "00c:FAILED")
	wantRuns(t, f, lid("e"), "00e1:RUNNING", "00e2:RUNNING")
	if task := f.Get(lid("f")); task.Status != rota.StatusWaiting || len(task.DependsOn) != 1 {
		t.Fatalf("dependent after the migration: %s, depends on %v", task.Status, task.DependsOn)
	}

	now := f.At(time.Minute)
	// The run running at the upgrade keeps its fencing.
	if _, err := st.RunHeartbeat(ctx, store.RunHeartbeatParams{RunID: lid("00a"), WorkerID: "w2", Now: now}); !errors.Is(err, rota.ErrLeaseLost) {
		t.Fatalf("a stranger's heartbeat of a migrated run: %v, want lease lost", err)
	}
	f.Heartbeat("w1", lid("00a"), now)
	if task := f.Succeed("w1", lid("00a"), now); task.Status != rota.StatusSuccess {
		t.Fatalf("migrated running task after its report: %s", task.Status)
	}
	if task := f.Get(lid("f")); task.Status != rota.StatusScheduled {
		t.Fatalf("dependent after its parent succeeded: %s, want SCHEDULED", task.Status)
	}
	// The run whose lease lapsed is expired, its task retried.
	res, err := st.RunExpire(ctx, store.RunExpireParams{Now: now, Backoff: func(int) time.Duration { return 0 }})
	if err != nil || res.Expired != 1 || res.Tasks[0] != lid("d") {
		t.Fatalf("RunExpire: %+v, %v; want task d's run expired", res, err)
	}
	// Retried tasks run again, their new runs in their rows after the old.
	claimed := f.Claim("w3", now, 10, "k").Runs
	if len(claimed) != 3 {
		t.Fatalf("claimed %d tasks, want 3 (c, d, f)", len(claimed))
	}
	for _, r := range claimed {
		f.Succeed("w3", r.RunID, now)
	}
	wantRuns(t, f, lid("c"), "00c:FAILED", "*:SUCCESS")
	wantRuns(t, f, lid("d"), "00d:TIMEOUT", "*:SUCCESS")
	// The multi-worker task finishes with its runs in run_log.
	f.Succeed("w1", lid("00e1"), now)
	if task := f.Succeed("w2", lid("00e2"), now); task.Status != rota.StatusSuccess {
		t.Fatalf("multi-worker task after both reports: %s", task.Status)
	}
	if err := st.Check(ctx); err != nil {
		t.Fatalf("Check after the work: %v", err)
	}
	wantEventsKept(t, st)
}

// wantEventsKept checks that the event of the old database is kept and
// listed with the chunks appended after the migration.
func wantEventsKept(t *testing.T, st *pgstore.Store) {
	t.Helper()
	ctx := t.Context()
	b, err := st.EventBounds(ctx)
	if err != nil || b.Oldest == 0 || b.Oldest != b.Last {
		t.Fatalf("EventBounds after the migration: %+v, %v; want the one old event", b, err)
	}
	evs := []rota.Event{{Type: rota.EventTask, TaskID: "x1"}, {Type: rota.EventTask, TaskID: "x2"}}
	if last, err := st.EventAppend(ctx, evs); err != nil || last != b.Last+2 {
		t.Fatalf("EventAppend after the migration: %d, %v; want %d", last, err, b.Last+2)
	}
	got, err := st.EventList(ctx, store.EventListParams{After: b.Oldest - 1, Limit: 10})
	if err != nil || len(got) != 3 || got[0].TaskID != lid("a") || got[2].TaskID != "x2" || got[2].ID != b.Last+2 {
		t.Fatalf("EventList after the migration: %+v, %v; want the old event and the 2 new", got, err)
	}
}

// lid is a 32-character id starting with c, for the migration's rows
// (run ids start with 00: older than those the store makes, as they were).
func lid(c string) string { return c + strings.Repeat("0", 32-len(c)) }

// wantRuns checks a task's runs, oldest first, each "<run>:<status>" (the
// run id by lid, or * for any).
func wantRuns(t *testing.T, f *storetest.Fixture, taskID string, want ...string) {
	t.Helper()
	task := f.Get(taskID)
	var got []string
	for _, r := range task.Runs {
		got = append(got, r.ID+":"+string(r.Status))
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		id, status, _ := strings.Cut(want[i], ":")
		ok = strings.HasSuffix(got[i], ":"+status) && (id == "*" || strings.HasPrefix(got[i], lid(id)+":"))
	}
	if !ok {
		t.Fatalf("task %s: runs %v, want %v", taskID, got, want)
	}
}

// oldLeanData is a database of schema version 8 at storetest's base time
// (1767225600000 ms): tasks a (running, lease 1 h), b (succeeded), c
// (failed once, waiting for its retry), d (running, lease lapsed at +30 s),
// e (two workers, both running) of kind k, f waiting for a, and an event.
var oldLeanData = strings.NewReplacer("A_", lid("a"), "B_", lid("b"), "C_", lid("c"), "D_", lid("d"), "E_", lid("e"),
	"F_", lid("f"), "RA", lid("00a"), "RB", lid("00b"), "RC", lid("00c"), "RD", lid("00d"), "RE1", lid("00e1"),
	"RE2", lid("00e2")).Replace(`
	INSERT INTO kinds (name) VALUES ('k');
	INSERT INTO tasks (id, kind, level, status, avail, attempt, failures, successes, running, max_retries, workers,
		holders, timeout_s, hb_timeout_s, created_at, run_at, start_time, end_time, worker_address, updated_at,
		deps_waiting) VALUES
	('A_', 'k', 1, 'RUNNING',   false, 1, 0, 0,     1, 3, 1, '{w1}',    0, 3600, 1767225600000, 1767225600000, 1767225600000, 0, 'addr', 1767225600000, 0),
	('B_', 'k', 1, 'SUCCESS',   false, 1, 0, 1,     0, 3, 1, '{w1}',    0, 30,   1767225600000, 1767225600000, 1767225600000, 1767225601000, 'addr', 1767225601000, 0),
	('C_', 'k', 1, 'SCHEDULED', true,  1, 1, 0,     0, 3, 1, '{}',      0, 30,   1767225600000, 1767225600000, 1767225600000, 0, 'addr', 1767225600500, 0),
	('D_', 'k', 1, 'RUNNING',   false, 1, 0, 0,     1, 3, 1, '{w1}',    0, 30,   1767225600000, 1767225600000, 1767225600000, 0, 'addr', 1767225600000, 0),
	('E_', 'k', 1, 'RUNNING',   false, 1, 0, 0,     2, 3, 2, '{w1,w2}', 0, 3600, 1767225600000, 1767225600000, 1767225600000, 0, 'addr', 1767225600000, 0),
	('F_', 'k', 1, 'WAITING',   false, 0, 0, 0,     0, 3, 1, '{}',      0, 30,   1767225600000, 1767225600000, 0, 0, '', 1767225600000, 1);
	INSERT INTO runs (id, task_id, kind, worker_id, worker_address, attempt, status, start_time, end_time,
		lease_expires_at, expires_at) VALUES
	('RA',  'A_', 'k', 'w1', 'addr', 1, 'RUNNING', 1767225600000, 0,             1767229200000, 1767229200000),
	('RB',  'B_', 'k', 'w1', 'addr', 1, 'SUCCESS', 1767225600000, 1767225601000, 0, 0),
	('RC',  'C_', 'k', 'w1', 'addr', 1, 'FAILED',  1767225600000, 1767225600500, 0, 0),
	('RD',  'D_', 'k', 'w1', 'addr', 1, 'RUNNING', 1767225600000, 0,             1767225630000, 1767225630000),
	('RE1', 'E_', 'k', 'w1', 'addr', 1, 'RUNNING', 1767225600000, 0,             1767229200000, 1767229200000),
	('RE2', 'E_', 'k', 'w2', 'addr', 1, 'RUNNING', 1767225600000, 0,             1767229200000, 1767229200000);
	INSERT INTO task_deps (task_id, dep_id) VALUES ('F_', 'A_');
	INSERT INTO workers (id, first_seen, last_seen) VALUES ('w1', 1767225600000, 1767225600000),
		('w2', 1767225600000, 1767225600000);
	INSERT INTO events (id, at, data) SELECT last_id + 1, 1767225600000, '{"type":"task","task":"A_"}' FROM event_seq;
	UPDATE event_seq SET last_id = last_id + 1;`)
