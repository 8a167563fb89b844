package sqlitestore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestListByStatusAcrossKinds checks the lists and counts by status that
// tasks_kind_status serves since 0013_status_index (a merge of one seek
// per kind and status): every page, in every order, is the tasks an
// unfiltered list holds, filtered; the counts are theirs; and each seek
// is one of tasks_kind_status.
func TestListByStatusAcrossKinds(t *testing.T) {
	t.Parallel()
	st := open(t).(*sqlitestore.Store)
	f := storetest.NewFixture(t, st)
	// Three kinds; in each, tasks left SCHEDULED, RUNNING and SUCCESS,
	// created at interleaved instants so that the orders differ.
	for i := range 30 {
		f.InsertNew(fmt.Sprintf("k%d", i%3), f.At(time.Duration(29-i)*time.Second))
	}
	for k := range 3 {
		kind := fmt.Sprintf("k%d", k)
		runs := f.Claim("w1", f.At(time.Minute), 6, kind).Runs
		for _, r := range runs[:3] {
			f.Succeed("w1", r.RunID, f.At(time.Minute+time.Duration(k)*time.Second))
		}
	}
	all, err := st.TaskList(f.Ctx(), store.TaskListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	filters := []store.TaskListParams{
		{Status: rota.StatusScheduled},
		{Status: rota.StatusSuccess},
		{Statuses: []rota.Status{rota.StatusRunning, rota.StatusSuccess}},
		{Kind: "k1", Statuses: []rota.Status{rota.StatusScheduled, rota.StatusRunning}},
		{Status: rota.StatusFailed}, // none
		{Statuses: []rota.Status{rota.StatusSuccess, rota.StatusScheduled, rota.StatusSuccess}},
	}
	sorts := []store.TaskSort{{}, {Field: "created", Asc: true}, {Field: "created"}, {Field: "finished"}}
	for _, filter := range filters {
		for _, sort := range sorts {
			p := filter
			p.Sort, p.Limit = sort, 4
			want := expectList(all.Tasks, p)
			var got []string
			for page := 0; ; page++ {
				res, err := st.TaskList(f.Ctx(), p)
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range res.Tasks {
					got = append(got, task.ID)
				}
				if res.NextCursor == "" || page > 20 {
					break
				}
				p.Cursor = res.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Errorf("list %+v: %v; want %v", p, got, want)
			}
		}
		counts, err := st.TaskCountByStatus(f.Ctx(), store.TaskListParams{Kind: filter.Kind})
		if err != nil {
			t.Fatal(err)
		}
		if want := expectCounts(all.Tasks, filter.Kind); fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("counts of kind %q: %v; want %v", filter.Kind, counts, want)
		}
	}
	plans, err := st.ListPlansForTest(f.Ctx(), store.TaskListParams{Statuses: []rota.Status{rota.StatusRunning, rota.StatusSuccess}})
	if err != nil {
		t.Fatal(err)
	}
	// A seek of tasks_kind_status per kind and status, and one of
	// tasks_running per kind for the RUNNING tasks whose run runs in
	// their row (since 0015_status_index_idle).
	if len(plans) != 9 {
		t.Fatalf("%d statements for 3 kinds and 2 statuses, one of them RUNNING; want 9", len(plans))
	}
	seeks := 0
	for _, plan := range plans {
		switch p := strings.Join(plan, "; "); {
		case strings.Contains(p, "USING INDEX tasks_running (kind=?)"):
		case strings.Contains(p, "USING INDEX tasks_kind_status (kind=? AND status=?)") && !strings.Contains(p, "TEMP B-TREE"):
			seeks++
		default:
			t.Errorf("plan of a part: %s; want tasks_kind_status (kind=? AND status=?) and no sort, or tasks_running (kind=?)", p)
		}
	}
	if seeks != 6 {
		t.Errorf("%d seeks of tasks_kind_status; want 6", seeks)
	}
	// Counts and stats read tasks_kind_status alone (a covering index) and
	// tasks_running, never the table.
	for _, p := range []store.TaskListParams{{}, {Kind: "k1"}} {
		plan, err := st.CountPlanForTest(f.Ctx(), p)
		if err != nil {
			t.Fatal(err)
		}
		wantCountPlan(t, fmt.Sprintf("count of kind %q", p.Kind), plan)
	}
	plan, err := st.StatsPlanForTest(f.Ctx())
	if err != nil {
		t.Fatal(err)
	}
	wantCountPlan(t, "stats", plan)
}

// wantCountPlan checks that plan, a count by status, reads
// tasks_kind_status as a covering index, and tasks_running.
func wantCountPlan(t *testing.T, what string, plan []string) {
	t.Helper()
	p := strings.Join(plan, "; ")
	if !strings.Contains(p, "USING COVERING INDEX tasks_kind_status") || !strings.Contains(p, "USING INDEX tasks_running") {
		t.Errorf("plan of %s: %s; want tasks_kind_status (covering) and tasks_running", what, p)
	}
}

// expectList is the page sequence p lists, computed from all tasks.
func expectList(all []rota.Task, p store.TaskListParams) []string {
	var out []rota.Task
	for _, task := range all {
		if (p.Kind == "" || task.Kind == p.Kind) && (p.Status == "" || task.Status == p.Status) &&
			(len(p.Statuses) == 0 || slices.Contains(p.Statuses, task.Status)) {
			out = append(out, task)
		}
	}
	value := func(task rota.Task) int64 {
		switch p.Sort.Field {
		case "created":
			return store.Millis(task.CreatedAt)
		case "finished":
			return store.Millis(task.EndTime)
		}
		return 0
	}
	slices.SortFunc(out, func(a, b rota.Task) int {
		c := value(a) - value(b)
		if c == 0 {
			c = int64(strings.Compare(a.ID, b.ID))
		}
		if p.Sort.Field == "" || !p.Sort.Asc {
			c = -c
		}
		return int(max(min(c, 1), -1))
	})
	ids := make([]string, 0, len(out))
	for _, task := range out {
		ids = append(ids, task.ID)
	}
	return ids
}

// expectCounts is TaskCountByStatus of kind ("" = all), from all tasks.
func expectCounts(all []rota.Task, kind string) map[rota.Status]int {
	out := map[rota.Status]int{}
	for _, task := range all {
		if kind == "" || task.Kind == kind {
			out[task.Status]++
		}
	}
	return out
}

// TestMigrateStatusIndex opens a database of the schema before
// 0013_status_index: tasks_status_id is dropped, the tasks are kept and
// listed by status.
func TestMigrateStatusIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newDatabase(t)
	err := sqlitestore.ExecForTest(ctx, path, undoIdleStatus+undoPinnedWaiting+undoStatusIndex+`
		INSERT INTO kinds (name) VALUES ('a'), ('b');
		INSERT INTO tasks (id, kind, level, payload, status, done, avail, max_retries, workers, timeout_s, hb_timeout_s,
			created_at, run_at, end_time, updated_at) VALUES
			('t1', 'a', 1, '{}', 'SCHEDULED', 0, 1, 3, 1, 0, 30, 1, 1, 0, 1),
			('t2', 'b', 1, '{}', 'SCHEDULED', 0, 1, 3, 1, 0, 30, 2, 2, 0, 2),
			('t3', 'b', 1, '{}', 'CANCELED',  1, 0, 3, 1, 0, 30, 3, 3, 3, 3);`)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()-3); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer st.Close()
	idx, err := st.IndexesForTest(ctx, "tasks")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(idx, "tasks_status_id") || !slices.Contains(idx, "tasks_kind_status") {
		t.Fatalf("indexes of tasks after the migration: %v; want tasks_kind_status, not tasks_status_id", idx)
	}
	res, err := st.TaskList(ctx, store.TaskListParams{Status: rota.StatusScheduled})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, task := range res.Tasks {
		got = append(got, task.ID)
	}
	if fmt.Sprint(got) != "[t2 t1]" {
		t.Fatalf("SCHEDULED tasks after the migration: %v; want [t2 t1]", got)
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
