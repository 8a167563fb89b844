package pgstore_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
)

// TestMigrateListIndexes opens a schema of the version before migration
// 0012 (which drops tasks_kind_id and tasks_status_id for
// tasks_status_list) with tasks in it: they are all kept, listed by status
// and kind as before, and the waiting one is claimed.
func TestMigrateListIndexes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	if err := pgstore.MigrateTo(ctx, testURL(), schema, 11); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`;
		INSERT INTO kinds (name) VALUES ('k'), ('m');
		INSERT INTO tasks (id, kind, level, payload, status, avail, max_retries, workers, timeout_s,
			hb_timeout_s, created_at, run_at, end_time, updated_at) VALUES
			('t1', 'k', 1, '{}', 'SUCCESS',   false, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('t2', 'k', 1, '{}', 'FAILED',    false, 3, 1, 0, 30, 2000, 2000, 2500, 2500),
			('t3', 'm', 1, '{}', 'SCHEDULED', true,  3, 1, 0, 30, 3000, 3000, 0,    3000),
			('t4', 'm', 1, '{}', 'CANCELED',  false, 3, 1, 0, 30, 4000, 4000, 4500, 4500)`); err != nil {
		t.Fatal(err)
	}
	st := openSchema(t, schema, "n1")
	var idx []string
	rows, err := conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'tasks'`, schema)
	if err == nil {
		idx, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(idx, "tasks_kind_id") || slices.Contains(idx, "tasks_status_id") || !slices.Contains(idx, "tasks_status_list") {
		t.Fatalf("indexes of tasks after the migration: %v", idx)
	}
	list := func(p store.TaskListParams) []string {
		t.Helper()
		res, err := st.TaskList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range res.Tasks {
			ids = append(ids, task.ID)
		}
		return ids
	}
	for _, c := range []struct {
		p    store.TaskListParams
		want []string
	}{
		{store.TaskListParams{}, []string{"t4", "t3", "t2", "t1"}},
		{store.TaskListParams{Kind: "k"}, []string{"t2", "t1"}},
		{store.TaskListParams{Status: rota.StatusSuccess}, []string{"t1"}},
		{store.TaskListParams{Status: rota.StatusFailed}, []string{"t2"}},
		{store.TaskListParams{Statuses: []rota.Status{rota.StatusScheduled, rota.StatusCanceled}}, []string{"t4", "t3"}},
		{store.TaskListParams{Status: rota.StatusCanceled, Kind: "k"}, nil},
	} {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Errorf("TaskList(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	res, err := st.TaskClaim(ctx, store.TaskClaimParams{WorkerID: "w1", Kinds: []string{"m"}, Max: 10, Now: store.FromMillis(5000),
		NewRunID: func() string { return "r1" }})
	if err != nil || len(res.Runs) != 1 || res.Runs[0].TaskID != "t3" {
		t.Fatalf("claim after the migration: %+v, %v; want t3", res, err)
	}
	if got := list(store.TaskListParams{Status: rota.StatusRunning}); !slices.Equal(got, []string{"t3"}) {
		t.Errorf("RUNNING after the claim: %v, want [t3]", got)
	}
	if got := list(store.TaskListParams{Status: rota.StatusScheduled}); len(got) != 0 {
		t.Errorf("SCHEDULED after the claim: %v, want none", got)
	}
}
