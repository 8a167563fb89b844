package pgstore_test

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCompleteGroupMatchesOneByOne settles a mixed group of reports in one
// transaction on one store and the same reports one by one on another store
// holding the same tasks: every report's error and every task's final
// state must be the same. The group holds successes,
// failures with and without retry, a release, both runs of two-worker
// tasks, a report whose lease lapsed, a second report of one run, a report
// by the wrong worker and an unknown run.
func TestCompleteGroupMatchesOneByOne(t *testing.T) {
	t.Parallel()
	grouped := openSchema(t, newSchema(t), "g")
	single := openSchema(t, newSchema(t), "s")
	f := storetest.NewFixture(t, grouped)
	var params []store.TaskInsertParams
	for i := range 24 {
		p := f.Params("k", f.At(time.Duration(i)*time.Millisecond))
		p.MaxRetries = 2
		p.HeartbeatTimeoutSeconds = 30
		if i%6 == 4 {
			p.Workers = 2
		}
		if i == 7 {
			p.HeartbeatTimeoutSeconds = 1 // its report comes after the lease
		}
		params = append(params, p)
	}
	now := f.At(time.Minute)
	type claimed struct {
		rota.ClaimedRun
		WorkerID string
	}
	claim := func(st store.Store) []claimed {
		var n int
		var runs []claimed
		for _, w := range []string{"w1", "w2"} {
			res, err := st.TaskClaim(t.Context(), store.TaskClaimParams{WorkerID: w, Kinds: []string{"k"}, Max: 100, Now: now,
				NewRunID: func() string { n++; return fmt.Sprintf("run-%04d", n) }})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Runs {
				runs = append(runs, claimed{r, w})
			}
		}
		return runs
	}
	for _, st := range []store.Store{grouped, single} {
		if _, err := st.TaskInsertMany(t.Context(), params); err != nil {
			t.Fatal(err)
		}
	}
	runs := claim(grouped)
	if other := claim(single); !reflect.DeepEqual(runs, other) {
		t.Fatalf("the two stores handed out different runs:\n%v\n%v", runs, other)
	}
	if len(runs) != 24+4 { // 4 two-worker tasks
		t.Fatalf("claimed %d runs, want 28", len(runs))
	}
	backoff := func(n int) time.Duration { return time.Duration(n) * time.Second }
	var reports []store.RunCompleteParams
	later := now.Add(2 * time.Second)
	for i, r := range runs {
		p := store.RunCompleteParams{RunID: r.RunID, WorkerID: r.WorkerID, Now: later, Backoff: backoff,
			Message: fmt.Sprintf("report %d", i)}
		switch i % 5 {
		case 0, 1:
			p.Success, p.Result = true, []byte(`{"ok":true}`)
		case 2:
			p.Retry = true
		case 3:
			p.Release = true
		case 4:
			// a failure without retry
		}
		reports = append(reports, p)
	}
	reports = append(reports,
		reports[0], // the same report again: its run has ended
		store.RunCompleteParams{RunID: runs[1].RunID, WorkerID: "someone-else", Success: true, Now: later},
		store.RunCompleteParams{RunID: "no-such-run", WorkerID: "w1", Success: true, Now: later},
	)

	gotTasks, gotErrs, err := pgstore.CompleteGroup(grouped, t.Context(), reports)
	if err != nil {
		t.Fatalf("group: %v", err)
	}
	var expired int
	for i, p := range reports {
		want, wantErr := pgstore.CompleteLocked(single, t.Context(), p)
		if code(gotErrs[i]) != code(wantErr) {
			t.Errorf("report %d (%s): grouped error %v, one by one %v", i, p.RunID, gotErrs[i], wantErr)
		}
		var ge, we *store.ExpiredError
		if errors.As(gotErrs[i], &ge) != errors.As(wantErr, &we) {
			t.Errorf("report %d: grouped error %v, one by one %v: one expired the run, the other did not", i, gotErrs[i], wantErr)
		}
		if ge != nil {
			expired++
		}
		if (gotTasks[i] == nil) != (want == nil) {
			t.Errorf("report %d (%s): grouped task %v, one by one %v", i, p.RunID, gotTasks[i], want)
		}
	}
	// A report in a group is answered with its task as the whole group
	// left it: compare with the task at the end, one by one.
	for i, task := range gotTasks {
		if task == nil {
			continue
		}
		want, err := single.TaskGet(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(task, want) {
			t.Errorf("report %d (%s): grouped task\n%+v\none by one, at the end\n%+v", i, reports[i].RunID, task, want)
		}
	}
	if expired != 1 {
		t.Errorf("%d reports expired their run, want 1 (the task with a 1 s heartbeat timeout)", expired)
	}
	for _, p := range params {
		g, err1 := grouped.TaskGet(t.Context(), p.ID)
		s, err2 := single.TaskGet(t.Context(), p.ID)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !reflect.DeepEqual(g, s) {
			t.Errorf("task %s: grouped\n%+v\none by one\n%+v", p.ID, g, s)
		}
	}
	for _, st := range []*pgstore.Store{grouped, single} {
		if err := st.Check(t.Context()); err != nil {
			t.Errorf("store inconsistent: %v", err)
		}
	}
}

// TestConcurrentReportsAreGrouped sends many reports at once through
// RunComplete (the completers group them): each gets its own answer, and
// a second report of a run gets lease lost.
func TestConcurrentReportsAreGrouped(t *testing.T) {
	t.Parallel()
	st := openSchema(t, newSchema(t), "n")
	f := storetest.NewFixture(t, st)
	var params []store.TaskInsertParams
	for i := range 300 {
		params = append(params, f.Params("k", f.At(time.Duration(i)*time.Millisecond)))
	}
	if _, err := st.TaskInsertMany(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	now := f.At(time.Minute)
	res := f.Claim("w", now, 300, "k")
	if len(res.Runs) != 300 {
		t.Fatalf("claimed %d, want 300", len(res.Runs))
	}
	var wg sync.WaitGroup
	errs := make([][2]error, len(res.Runs))
	for i, r := range res.Runs {
		for j := range 2 {
			wg.Go(func() {
				task, err := st.RunComplete(t.Context(), store.RunCompleteParams{RunID: r.RunID, WorkerID: "w", Success: true, Now: now})
				if err == nil && (task == nil || task.ID != r.TaskID || task.Status != rota.StatusSuccess) {
					err = fmt.Errorf("report answered with task %+v", task)
				}
				errs[i][j] = err
			})
		}
	}
	wg.Wait()
	for i, e := range errs {
		ok, lost := 0, 0
		for _, err := range e {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, rota.ErrLeaseLost):
				lost++
			default:
				t.Errorf("run %d: %v", i, err)
			}
		}
		if ok != 1 || lost != 1 {
			t.Errorf("run %d: %d reports succeeded and %d lost the lease, want 1 and 1", i, ok, lost)
		}
	}
	stats, err := st.Stats(t.Context(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Kinds) != 1 || stats.Kinds[0].Counts[rota.StatusSuccess] != 300 {
		t.Errorf("want 300 tasks SUCCESS, stats %+v", stats)
	}
	if err := st.Check(t.Context()); err != nil {
		t.Errorf("store inconsistent: %v", err)
	}
}

// code is the rota error code of err, "" for nil, "other" for other errors.
func code(err error) rota.Code {
	if err == nil {
		return ""
	}
	var re *rota.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return "other"
}

// TestCompleteFastAnswers settles, in one group through the one-statement
// path, success reports whose answer is more than the row: a retried task
// (its first run in run_log), a parent (its dependent released by the
// trigger) and a child (its dependency listed), under a kind with a
// MaxRunning cap. Each answer must be the task as read after.
func TestCompleteFastAnswers(t *testing.T) {
	t.Parallel()
	st := openSchema(t, newSchema(t), "f")
	f := storetest.NewFixture(t, st)
	ctx := t.Context()
	now := f.At(time.Second)
	maxRunning := 10
	if _, err := st.KindUpsert(ctx, store.KindUpsertParams{Name: "k", MaxRunning: &maxRunning}); err != nil {
		t.Fatal(err)
	}
	retried := f.Params("k", now)
	retried.MaxRetries = 1
	f.Insert(retried)
	f.Fail("w1", f.ClaimOne("w1", now, "k").RunID, now, func(int) time.Duration { return 0 })
	parent := f.InsertNew("k", now)
	child := f.Params("k", now)
	child.DependsOn = []string{parent.ID}
	f.Insert(child)
	res := f.Claim("w1", now, 10, "k")
	if len(res.Runs) != 2 { // the retried task, the parent (the child waits)
		t.Fatalf("claimed %d runs, want 2", len(res.Runs))
	}
	report := func(runs []rota.ClaimedRun) []*rota.Task {
		ps := make([]store.RunCompleteParams, len(runs))
		for i, r := range runs {
			ps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now, Message: "done",
				Result: []byte(`{"n":1}`)}
		}
		tasks, errs, err := pgstore.CompleteGroup(st, ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("report %d: %v", i, err)
			}
			if d := cmp.Diff(f.Get(tasks[i].ID), tasks[i]); d != "" {
				t.Errorf("answer for task %s differs from the task read (-read +answer):\n%s", tasks[i].ID, d)
			}
		}
		return tasks
	}
	for _, task := range report(res.Runs) {
		switch task.ID {
		case retried.ID:
			if len(task.Runs) != 2 || task.Runs[0].Status != rota.StatusFailed {
				t.Errorf("retried task's runs: %+v", task.Runs)
			}
		case parent.ID:
			if len(task.Dependents) != 1 || task.Dependents[0] != child.ID {
				t.Errorf("parent's dependents: %v", task.Dependents)
			}
		}
	}
	// The trigger released the child: claim and report it.
	run := f.ClaimOne("w1", now, "k")
	if run.TaskID != child.ID {
		t.Fatalf("claimed %s, want the child %s", run.TaskID, child.ID)
	}
	if got := report([]rota.ClaimedRun{run})[0]; len(got.DependsOn) != 1 || got.DependsOn[0] != parent.ID {
		t.Errorf("child's dependencies: %v", got.DependsOn)
	}
	if err := st.Check(ctx); err != nil {
		t.Errorf("store inconsistent: %v", err)
	}
}

// TestReportsOfARequestGoTogether sends a request's reports with
// RunCompleteMany to an idle store: they are settled by one statement
// (one completer's group), not the first alone and the rest after; and
// each gets its own answer, a report of an unknown run its own error.
func TestReportsOfARequestGoTogether(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Minute)
	for range 12 {
		f.InsertNew("k", f.At(0))
	}
	res := f.Claim("w", now, 12, "k")
	if len(res.Runs) != 12 {
		t.Fatalf("claimed %d, want 12", len(res.Runs))
	}
	report := func(runs []rota.ClaimedRun) []store.RunCompleteParams {
		ps := make([]store.RunCompleteParams, len(runs))
		for i, r := range runs {
			ps[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w", Success: true, Now: now}
		}
		return ps
	}
	st.RunCompleteMany(t.Context(), report(res.Runs[:1])) // prepares the statement
	before := c.Snapshot()
	tasks, errs := st.RunCompleteMany(t.Context(), report(res.Runs[1:6]))
	if d := c.Snapshot().Sub(before).Caller; d.Statements != 1 || d.Commits != 1 {
		t.Errorf("5 reports of one request: %v, want 1 statement, 1 commit", d)
	}
	for i, r := range res.Runs[1:6] {
		if errs[i] != nil || tasks[i] == nil || tasks[i].ID != r.TaskID || tasks[i].Status != rota.StatusSuccess {
			t.Errorf("report %d: task %+v, err %v; want task %s SUCCESS", i, tasks[i], errs[i], r.TaskID)
		}
	}
	ps := report(res.Runs[6:])
	ps = append(ps[:3:3], append([]store.RunCompleteParams{{RunID: "unknown-run", WorkerID: "w", Success: true, Now: now}}, ps[3:]...)...)
	tasks, errs = st.RunCompleteMany(t.Context(), ps)
	for i, p := range ps {
		if p.RunID == "unknown-run" {
			if !errors.Is(errs[i], rota.ErrNotFound) || tasks[i] != nil {
				t.Errorf("report of an unknown run: task %+v, err %v; want not found", tasks[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || tasks[i] == nil || tasks[i].Status != rota.StatusSuccess {
			t.Errorf("report %d: task %+v, err %v; want SUCCESS", i, tasks[i], errs[i])
		}
	}
}
