package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// inserted is the task that p must produce: SCHEDULED, no run yet.
func inserted(p store.TaskInsertParams) *rota.Task {
	return &rota.Task{
		ID:                      p.ID,
		Kind:                    p.Kind,
		Priority:                p.Priority,
		Payload:                 p.Payload,
		Key:                     p.Key,
		Status:                  rota.StatusScheduled,
		MaxRetries:              p.MaxRetries,
		Workers:                 p.Workers,
		WorkerIDs:               p.WorkerIDs,
		TimeoutSeconds:          p.TimeoutSeconds,
		HeartbeatTimeoutSeconds: p.HeartbeatTimeoutSeconds,
		CreatedAt:               p.Now,
		RunAt:                   p.RunAt,
		ScheduleID:              p.ScheduleID,
		FireTime:                p.FireTime,
	}
}

func testTaskInsert(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "RoundTrip", taskInsertRoundTrip)

	parallel(t, ns, "ZeroOptions", taskInsertZeroOptions)

	parallel(t, ns, "Payloads", taskInsertPayloads)

	parallel(t, ns, "GetUnknown", taskInsertGetUnknown)

	parallel(t, ns, "DuplicateID", taskInsertDuplicateID)

	parallel(t, ns, "Many", taskInsertMany)

	parallel(t, ns, "ManyAllOrNothing", taskInsertManyAllOrNothing)
}

// taskInsertRoundTrip is the RoundTrip subtest of testTaskInsert.
func taskInsertRoundTrip(t *testing.T, f *Fixture) {
	now := f.At(sec(1)).Add(123 * 1e6) // a millisecond fraction
	p := f.Params("email", now)
	p.Priority = rota.PriorityHigh
	p.Payload = json.RawMessage(`{ "to": ["a@example.com", "b@example.com"], "n": 2.5, "nested": {"z": null, "a": true} }`)
	p.Key = "welcome-42"
	p.RunAt = now.Add(sec(10))
	p.MaxRetries = 5
	p.TimeoutSeconds = 60
	p.HeartbeatTimeoutSeconds = 45
	p.Workers = 2
	p.WorkerIDs = []string{"w1", "w2"}
	p.ScheduleID = f.NewTaskID(f.Base)
	p.FireTime = now.Add(-sec(1))

	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	if res.Existing {
		t.Fatal("TaskInsert of a new task: Existing = true")
	}
	want := inserted(p)
	diff(t, "TaskInsert result", want, res.Task)
	if len(res.Task.Runs) != 0 {
		t.Fatalf("TaskInsert result has runs %s", runsString(res.Task))
	}
	diff(t, "TaskGet", want, f.Get(p.ID))
}

// taskInsertZeroOptions is the ZeroOptions subtest of testTaskInsert.
func taskInsertZeroOptions(t *testing.T, f *Fixture) {
	// No key, no pinning, no schedule, no timeout, no retries: the zero
	// values come back as zero values.
	p := f.Params(kindK, f.At(0))
	p.MaxRetries = 0
	got := f.Insert(p)
	diff(t, "TaskInsert result", inserted(p), got)
	got = f.Get(p.ID)
	diff(t, "TaskGet", inserted(p), got)
	if !got.StartTime.IsZero() || !got.EndTime.IsZero() || !got.FireTime.IsZero() {
		t.Errorf("StartTime %v, EndTime %v, FireTime %v; want all zero", got.StartTime, got.EndTime, got.FireTime)
	}
	if len(got.Result) != 0 {
		t.Errorf("Result = %s, want empty", got.Result)
	}
}

// taskInsertPayloads is the Payloads subtest of testTaskInsert.
func taskInsertPayloads(t *testing.T, f *Fixture) {
	// Any JSON value is a payload, handed back as the same JSON value.
	payloads := []string{
		`{}`, `{"a":1,"b":[1,2,3],"c":{"d":"é ✓ \u00e9","e":null}}`, `[1,"two",3.5,false]`,
		`"just a string"`, `42`, `-0.125`, `true`, `null`, `{"big":"` + strings.Repeat("x", 64<<10) + `"}`,
	}
	for i, pl := range payloads {
		p := f.Params(kindK, f.At(sec(i)))
		p.Payload = json.RawMessage(pl)
		f.Insert(p)
		if got := f.Get(p.ID).Payload; !jsonEqual(got, p.Payload) {
			t.Errorf("payload %s came back as %s", pl, got)
		}
	}
}

// taskInsertGetUnknown is the GetUnknown subtest of testTaskInsert.
func taskInsertGetUnknown(t *testing.T, f *Fixture) {
	f.InsertNew(kindK, f.At(0))
	_, err := f.Store.TaskGet(f.Ctx(), f.NewTaskID(f.At(sec(5))))
	wantErr(t, "TaskGet(unknown id)", err, rota.ErrNotFound)
}

// taskInsertDuplicateID is the DuplicateID subtest of testTaskInsert.
func taskInsertDuplicateID(t *testing.T, f *Fixture) {
	// The caller makes ids; reusing one must fail rather than overwrite
	// or silently drop the task.
	first := f.InsertNew(kindK, f.At(0))
	p := f.Params(kindK, f.At(sec(1)))
	p.ID = first.ID
	p.Payload = json.RawMessage(`{"other":true}`)
	if _, err := f.Store.TaskInsert(f.Ctx(), p); err == nil {
		t.Fatal("TaskInsert with the id of an existing task: no error")
	}
	if got := f.Get(first.ID); !jsonEqual(got.Payload, json.RawMessage(`{"n":1}`)) {
		t.Fatalf("existing task overwritten: payload %s", got.Payload)
	}
}

// taskInsertMany is the Many subtest of testTaskInsert.
func taskInsertMany(t *testing.T, f *Fixture) {
	var ps []store.TaskInsertParams
	for i := range 6 {
		p := f.Params(kindK, f.At(sec(i)))
		p.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		switch i { // one batch of every shape of unkeyed task
		case 1:
			p.Payload = nil
		case 2:
			p.WorkerIDs = []string{"w-a", "w-b"}
			p.Priority = rota.PriorityHigh
		case 3:
			p.RunAt = f.At(sec(90))
			p.TimeoutSeconds, p.Workers, p.MaxRetries = 7, 2, 5
		case 4:
			p.Kind = kindK + "-other"
		case 5:
			p.ScheduleID, p.FireTime = "sched-1", f.At(sec(5))
		}
		ps = append(ps, p)
	}
	res, err := f.Store.TaskInsertMany(f.Ctx(), ps)
	if err != nil {
		t.Fatalf("TaskInsertMany: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("TaskInsertMany: %d results for %d params", len(res), len(ps))
	}
	for i, p := range ps {
		if res[i].Existing {
			t.Errorf("result %d: Existing = true", i)
		}
		diff(t, fmt.Sprintf("result %d", i), inserted(p), res[i].Task)
		diff(t, fmt.Sprintf("TaskGet %d", i), inserted(p), f.Get(p.ID))
	}
}

// taskInsertManyAllOrNothing is the ManyAllOrNothing subtest of testTaskInsert.
func taskInsertManyAllOrNothing(t *testing.T, f *Fixture) {
	existing := f.InsertNew(kindK, f.At(0))
	good := f.Params(kindK, f.At(sec(1)))
	bad := f.Params(kindK, f.At(sec(2)))
	bad.ID = existing.ID
	if _, err := f.Store.TaskInsertMany(f.Ctx(), []store.TaskInsertParams{good, bad}); err == nil {
		t.Fatal("TaskInsertMany with a duplicate id: no error")
	}
	_, err := f.Store.TaskGet(f.Ctx(), good.ID)
	wantErr(t, "TaskGet of the first task of a failed batch", err, rota.ErrNotFound)
	if all := f.ListAll(store.TaskListParams{}); len(all) != 1 {
		t.Fatalf("after a failed batch the store holds %d tasks, want 1", len(all))
	}
}

func testTaskList(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "Empty", taskListEmpty)

	parallel(t, ns, "Pages", taskListPages)

	parallel(t, ns, "FullLastPage", taskListFullLastPage)

	parallel(t, ns, "PagesFiltered", taskListPagesFiltered)

	parallel(t, ns, "Filters", taskListFilters)

	parallel(t, ns, "FiltersMore", taskListFiltersMore)

	parallel(t, ns, "SameAsGet", taskListSameAsGet)
}

// taskListEmpty is the Empty subtest of testTaskList.
func taskListEmpty(t *testing.T, f *Fixture) {
	res := f.List(store.TaskListParams{Limit: 10})
	if len(res.Tasks) != 0 || res.NextCursor != "" {
		t.Fatalf("TaskList of an empty store: %d tasks, next %q", len(res.Tasks), res.NextCursor)
	}
}

// taskListPages is the Pages subtest of testTaskList.
func taskListPages(t *testing.T, f *Fixture) {
	// 25 tasks, limit 10: pages of 10, 10 and 5, newest first, each task
	// exactly once, and a task inserted between pages does not disturb
	// the later pages (it is newer than the cursor).
	var want []string
	for i := range 25 {
		want = append(want, f.InsertNew(kindK, f.At(sec(i))).ID)
	}
	slices.Reverse(want)

	p := store.TaskListParams{Limit: 10}
	page := f.List(p)
	diff(t, "page 1 ids", want[:10], ids(page.Tasks))
	if page.NextCursor == "" {
		t.Fatal("page 1: NextCursor empty, want more")
	}
	f.InsertNew(kindK, f.At(sec(100))) // newer than everything listed

	p.Cursor = page.NextCursor
	page = f.List(p)
	diff(t, "page 2 ids", want[10:20], ids(page.Tasks))
	if page.NextCursor == "" {
		t.Fatal("page 2: NextCursor empty, want more")
	}

	p.Cursor = page.NextCursor
	page = f.List(p)
	diff(t, "page 3 ids", want[20:], ids(page.Tasks))
	if page.NextCursor != "" {
		t.Fatalf("page 3 is the last: NextCursor = %q, want empty", page.NextCursor)
	}
}

// taskListFullLastPage is the FullLastPage subtest of testTaskList.
func taskListFullLastPage(t *testing.T, f *Fixture) {
	// The suite requires NextCursor == "" as soon as nothing remains,
	// also when the last page is exactly full (no empty extra page).
	var want []string
	for i := range 20 {
		want = append(want, f.InsertNew(kindK, f.At(sec(i))).ID)
	}
	slices.Reverse(want)
	page := f.List(store.TaskListParams{Limit: 10})
	diff(t, "page 1 ids", want[:10], ids(page.Tasks))
	if page.NextCursor == "" {
		t.Fatal("page 1: NextCursor empty, want more")
	}
	page = f.List(store.TaskListParams{Limit: 10, Cursor: page.NextCursor})
	diff(t, "page 2 ids", want[10:], ids(page.Tasks))
	if page.NextCursor != "" {
		t.Fatalf("page 2 holds the last task: NextCursor = %q, want empty", page.NextCursor)
	}

	page = f.List(store.TaskListParams{Limit: 20})
	if len(page.Tasks) != 20 || page.NextCursor != "" {
		t.Fatalf("limit 20 over 20 tasks: %d tasks, next %q; want 20 and empty", len(page.Tasks), page.NextCursor)
	}
	page = f.List(store.TaskListParams{Limit: 1000})
	if len(page.Tasks) != 20 || page.NextCursor != "" {
		t.Fatalf("limit 1000 over 20 tasks: %d tasks, next %q; want 20 and empty", len(page.Tasks), page.NextCursor)
	}
}

// taskListPagesFiltered is the PagesFiltered subtest of testTaskList.
func taskListPagesFiltered(t *testing.T, f *Fixture) {
	// Pagination under a filter: 25 tasks of kind a interleaved with 10
	// of kind b; kind a, limit 10 → 10, 10, 5.
	var want []string
	for i := range 25 {
		want = append(want, f.InsertNew("a", f.At(sec(2*i))).ID)
		if i%3 == 0 {
			f.InsertNew("b", f.At(sec(2*i+1)))
		}
	}
	slices.Reverse(want)
	p := store.TaskListParams{Kind: "a", Limit: 10}
	var got []string
	var sizes []int
	for range 10 {
		page := f.List(p)
		for _, task := range page.Tasks {
			if task.Kind != "a" {
				t.Fatalf("kind filter a returned task %s of kind %s", task.ID, task.Kind)
			}
		}
		got = append(got, ids(page.Tasks)...)
		sizes = append(sizes, len(page.Tasks))
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	diff(t, "page sizes", []int{10, 10, 5}, sizes)
	diff(t, "ids over all pages", want, got)
}

// taskListFilters is the Filters subtest of testTaskList.
func taskListFilters(t *testing.T, f *Fixture) {
	// a1 SUCCESS, a2 RUNNING, a3 SCHEDULED key x, b1 SCHEDULED key x,
	// b2 CANCELED key y.
	a1 := f.InsertNew("a", f.At(0))
	run := f.ClaimOne("w1", f.At(sec(1)), "a")
	f.Succeed("w1", run.RunID, f.At(sec(2)))
	a2 := f.InsertNew("a", f.At(sec(3)))
	f.ClaimOne("w1", f.At(sec(4)), "a")
	p := f.Params("a", f.At(sec(5)))
	p.Key = "x"
	a3 := f.Insert(p)
	p = f.Params("b", f.At(sec(6)))
	p.Key = "x"
	b1 := f.Insert(p)
	p = f.Params("b", f.At(sec(7)))
	p.Key = "y"
	b2 := f.Insert(p)
	if _, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: b2.ID, Now: f.At(sec(8))}); err != nil {
		t.Fatalf("TaskStop: %v", err)
	}

	cases := []struct {
		name string
		p    store.TaskListParams
		want []string
	}{
		{"all", store.TaskListParams{}, []string{b2.ID, b1.ID, a3.ID, a2.ID, a1.ID}},
		{"kind a", store.TaskListParams{Kind: "a"}, []string{a3.ID, a2.ID, a1.ID}},
		{"kind b", store.TaskListParams{Kind: "b"}, []string{b2.ID, b1.ID}},
		{"unknown kind", store.TaskListParams{Kind: "nope"}, nil},
		{"SCHEDULED", store.TaskListParams{Status: rota.StatusScheduled}, []string{b1.ID, a3.ID}},
		{"RUNNING", store.TaskListParams{Status: rota.StatusRunning}, []string{a2.ID}},
		{"SUCCESS", store.TaskListParams{Status: rota.StatusSuccess}, []string{a1.ID}},
		{"CANCELED", store.TaskListParams{Status: rota.StatusCanceled}, []string{b2.ID}},
		{"FAILED", store.TaskListParams{Status: rota.StatusFailed}, nil},
		{"key x", store.TaskListParams{Key: "x"}, []string{b1.ID, a3.ID}},
		{"key y", store.TaskListParams{Key: "y"}, []string{b2.ID}},
		{"unknown key", store.TaskListParams{Key: "nope"}, nil},
		{"kind a key x", store.TaskListParams{Kind: "a", Key: "x"}, []string{a3.ID}},
		{"kind b SCHEDULED", store.TaskListParams{Kind: "b", Status: rota.StatusScheduled}, []string{b1.ID}},
		{"kind a CANCELED", store.TaskListParams{Kind: "a", Status: rota.StatusCanceled}, nil},
		{"key x SCHEDULED kind b", store.TaskListParams{Kind: "b", Key: "x", Status: rota.StatusScheduled}, []string{b1.ID}},
	}
	for _, c := range cases {
		got := f.ListAll(c.p)
		diff(t, "TaskList "+c.name, c.want, ids(got))
		for _, task := range got {
			if len(task.Runs) != 0 {
				t.Errorf("TaskList %s: task %s has runs %s; TaskList returns tasks without runs", c.name, task.ID, runsString(&task))
			}
		}
		// The same, one task per page.
		var paged []string
		p := c.p
		p.Limit = 1
		for range 10 {
			page := f.List(p)
			paged = append(paged, ids(page.Tasks)...)
			if page.NextCursor == "" {
				break
			}
			p.Cursor = page.NextCursor
		}
		diff(t, "TaskList with limit 1 "+c.name, c.want, paged)
	}
}

// taskListSameAsGet is the SameAsGet subtest of testTaskList.
func taskListSameAsGet(t *testing.T, f *Fixture) {
	// A listed task carries the same fields as TaskGet, runs aside.
	p := f.Params(kindK, f.At(0))
	p.Key = "k1"
	p.WorkerIDs = []string{"w1"}
	p.TimeoutSeconds = 9
	f.Insert(p)
	run := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Complete(store.RunCompleteParams{RunID: run.RunID, WorkerID: "w1", Success: true, Message: "ok", Result: json.RawMessage(`{"r":1}`), Now: f.At(sec(2))})
	want := f.Get(p.ID)
	want.Runs = nil
	got := f.ListAll(store.TaskListParams{})
	if len(got) != 1 {
		t.Fatalf("TaskList: %d tasks, want 1", len(got))
	}
	diff(t, "listed task vs TaskGet", *want, got[0])
}

// keyed returns insert params of kind with key and a payload telling which
// insert it was.
func keyed(f *Fixture, kind, key string, at int) store.TaskInsertParams {
	p := f.Params(kind, f.At(sec(at)))
	p.Key = key
	p.Payload = json.RawMessage(fmt.Sprintf(`{"at":%d}`, at))
	return p
}

// keyedState is a state a keyed task is brought into: setup takes the task
// there (time ≤ 50s); status is the task's status after it (ended states).
type keyedState struct {
	name   string
	status rota.Status
	setup  func(f *Fixture, id string)
}

// keyedWhileUnfinished lists the states of a keyed task that hold its key:
// a second insert with the key returns it.
func keyedWhileUnfinished() []keyedState {
	return []keyedState{
		{"SCHEDULED", "", func(*Fixture, string) {}},
		{"RUNNING", "", func(f *Fixture, _ string) { f.ClaimOne("w1", f.At(sec(1)), kindK) }},
		{"BackingOff", "", func(f *Fixture, _ string) {
			run := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Fail("w1", run.RunID, f.At(sec(2)), backoff7)
		}},
		{"StopRequested", "", func(f *Fixture, id string) {
			f.ClaimOne("w1", f.At(sec(1)), kindK)
			if _, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: id, Now: f.At(sec(2))}); err != nil {
				f.TB.Fatalf("TaskStop: %v", err)
			}
		}},
	}
}

// keyedAfterFinished lists the ends of a keyed task. A finished task
// still holds its key (until it is cleaned): a second insert with the key
// returns it, or runs it again when asked to (RerunIfFinished).
func keyedAfterFinished() []keyedState {
	return []keyedState{
		{"SUCCESS", rota.StatusSuccess, func(f *Fixture, _ string) {
			run := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Succeed("w1", run.RunID, f.At(sec(2)))
		}},
		{"FAILED", rota.StatusFailed, func(f *Fixture, _ string) {
			run := f.ClaimOne("w1", f.At(sec(1)), kindK)
			f.Complete(store.RunCompleteParams{RunID: run.RunID, WorkerID: "w1", Message: "fatal", Now: f.At(sec(2))})
		}},
		{"CANCELED", rota.StatusCanceled, func(f *Fixture, id string) {
			if _, err := f.Store.TaskStop(f.Ctx(), store.TaskStopParams{ID: id, Now: f.At(sec(2))}); err != nil {
				f.TB.Fatalf("TaskStop: %v", err)
			}
		}},
	}
}

func testIdempotency(t *testing.T, ns newStoreFunc) {
	for _, c := range keyedWhileUnfinished() {
		parallel(t, ns, "ExistingWhile"+c.name, func(t *testing.T, f *Fixture) { idempotencyExistingWhile(t, f, c.setup) })
	}
	for _, c := range keyedWhileUnfinished() {
		parallel(t, ns, "RerunLeaves"+c.name, func(t *testing.T, f *Fixture) { idempotencyRerunLeavesUnfinished(t, f, c.setup) })
	}
	for _, c := range keyedAfterFinished() {
		parallel(t, ns, "ExistingAfter"+c.name, func(t *testing.T, f *Fixture) { idempotencyExistingAfter(t, f, c.status, c.setup) })
		parallel(t, ns, "RerunAfter"+c.name, func(t *testing.T, f *Fixture) { idempotencyRerunAfter(t, f, c.status, c.setup) })
	}
	parallel(t, ns, "FreeAfterCleanup", idempotencyFreeAfterCleanup)
	parallel(t, ns, "RerunInBatch", idempotencyRerunInBatch)
	parallel(t, ns, "RerunConcurrent", idempotencyRerunConcurrent)

	parallel(t, ns, "KeyIsPerKind", idempotencyKeyIsPerKind)

	parallel(t, ns, "Concurrent", idempotencyConcurrent)

	parallel(t, ns, "ManyDuplicateInBatch", idempotencyManyDuplicateInBatch)
}

// idempotencyExistingWhile checks that a second insert with a key returns
// the task holding it, which setup brought into an unfinished state.
func idempotencyExistingWhile(t *testing.T, f *Fixture, setup func(f *Fixture, id string)) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	setup(f, first.ID)
	before := f.Get(first.ID)

	p := keyed(f, kindK, "x", 60)
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert of a duplicate key: %v", err)
	}
	if !res.Existing {
		t.Fatalf("TaskInsert of key x while the first is %s: Existing = false (task %s)", before.Status, res.Task.ID)
	}
	if res.Task.ID != first.ID {
		t.Fatalf("Existing task id %s, want %s", res.Task.ID, first.ID)
	}
	if !jsonEqual(res.Task.Payload, first.Payload) || res.Task.Status != before.Status {
		t.Fatalf("Existing task: payload %s status %s, want the first's (%s, %s)", res.Task.Payload, res.Task.Status, first.Payload, before.Status)
	}
	_, err = f.Store.TaskGet(f.Ctx(), p.ID)
	wantErr(t, "TaskGet of the id of a deduplicated insert", err, rota.ErrNotFound)
	after := f.Get(first.ID)
	diff(t, "existing task after a duplicate insert", before, after)
	if n := len(f.ListAll(store.TaskListParams{Key: "x"})); n != 1 {
		t.Fatalf("tasks with key x: %d, want 1", n)
	}
}

// idempotencyExistingAfter checks that a finished task keeps its key: a
// second insert with the key returns it as it is, with no new task or run.
func idempotencyExistingAfter(t *testing.T, f *Fixture, status rota.Status, finish func(f *Fixture, id string)) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	finish(f, first.ID)
	before := f.Get(first.ID)
	wantStatus(t, before, status)

	p := keyed(f, kindK, "x", 60)
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert after the keyed task ended: %v", err)
	}
	if !res.Existing || res.Rerun || res.Task.ID != first.ID {
		t.Fatalf("TaskInsert after the keyed task ended %s: Existing %v Rerun %v id %s, want existing %s", status, res.Existing, res.Rerun, res.Task.ID, first.ID)
	}
	if res.Task.Status != status {
		t.Fatalf("existing task status %s, want %s", res.Task.Status, status)
	}
	_, err = f.Store.TaskGet(f.Ctx(), p.ID)
	wantErr(t, "TaskGet of the id of a deduplicated insert", err, rota.ErrNotFound)
	diff(t, "finished task after a duplicate insert", before, f.Get(first.ID))
	diff(t, "tasks with key x", []string{first.ID}, ids(f.ListAll(store.TaskListParams{Key: "x"})))
	if got := f.Claim("w2", f.At(sec(61)), 10, kindK); len(got.Runs) != 0 {
		t.Fatalf("claim after a duplicate insert of a finished key: %d runs, want none", len(got.Runs))
	}
}

// idempotencyRerunAfter checks that RerunIfFinished makes the finished task
// holding the key claimable again under its id: runs cleared, counters
// reset, due at the insert's RunAt, its definition kept.
func idempotencyRerunAfter(t *testing.T, f *Fixture, status rota.Status, finish func(f *Fixture, id string)) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	finish(f, first.ID)
	wantStatus(t, f.Get(first.ID), status)

	p := keyed(f, kindK, "x", 60)
	p.RunAt = f.At(sec(65))
	p.RerunIfFinished = true
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert with RerunIfFinished: %v", err)
	}
	if !res.Existing || !res.Rerun || res.Task.ID != first.ID {
		t.Fatalf("rerun of a %s task: Existing %v Rerun %v id %s, want rerun of %s", status, res.Existing, res.Rerun, res.Task.ID, first.ID)
	}
	want := *first
	want.RunAt = f.At(sec(65))
	got := f.Get(first.ID)
	diff(t, "rerun task (as returned)", want, *res.Task)
	diff(t, "rerun task (as stored)", &want, got)
	_, err = f.Store.TaskGet(f.Ctx(), p.ID)
	wantErr(t, "TaskGet of the id of a rerun insert", err, rota.ErrNotFound)

	if next, ok, err := f.Store.TaskNextRunAt(f.Ctx(), []string{kindK}, f.At(sec(60))); err != nil || !ok || !next.Equal(f.At(sec(65))) {
		t.Fatalf("TaskNextRunAt after the rerun: %v %v %v, want %v", next, ok, err, f.At(sec(65)))
	}
	// The worker that ran it before may run it again; it succeeds afresh.
	run := f.ClaimOne("w1", f.At(sec(66)), kindK)
	if run.TaskID != first.ID {
		t.Fatalf("claimed %s, want the rerun task %s", run.TaskID, first.ID)
	}
	f.Succeed("w1", run.RunID, f.At(sec(67)))
	done := f.Get(first.ID)
	wantStatus(t, done, rota.StatusSuccess)
	if len(done.Runs) != 1 || done.Runs[0].Attempt != 1 {
		t.Fatalf("runs after the rerun: %+v, want one, attempt 1", done.Runs)
	}
}

// idempotencyRerunLeavesUnfinished checks that RerunIfFinished never
// disturbs a task that is not finished: it is answered as it is.
func idempotencyRerunLeavesUnfinished(t *testing.T, f *Fixture, setup func(f *Fixture, id string)) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	setup(f, first.ID)
	before := f.Get(first.ID)

	p := keyed(f, kindK, "x", 60)
	p.RerunIfFinished = true
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert with RerunIfFinished: %v", err)
	}
	if !res.Existing || res.Rerun || res.Task.ID != first.ID {
		t.Fatalf("rerun while %s: Existing %v Rerun %v id %s, want existing %s untouched", before.Status, res.Existing, res.Rerun, res.Task.ID, first.ID)
	}
	diff(t, "unfinished task after a rerun insert", before, f.Get(first.ID))
}

// idempotencyFreeAfterCleanup checks that a key is free again once the
// task holding it is cleaned by retention.
func idempotencyFreeAfterCleanup(t *testing.T, f *Fixture) {
	keep := 10
	if _, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, RetentionSeconds: &keep}); err != nil {
		t.Fatal(err)
	}
	first := f.Insert(keyed(f, kindK, "x", 0))
	run := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Succeed("w1", run.RunID, f.At(sec(2)))
	if n, err := f.Store.TaskCleanup(f.Ctx(), store.TaskCleanupParams{Now: f.At(sec(20)), Limit: 100}); err != nil || n != 1 {
		t.Fatalf("TaskCleanup: %d, %v; want 1", n, err)
	}
	p := keyed(f, kindK, "x", 30)
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil || res.Existing || res.Task.ID != p.ID {
		t.Fatalf("insert after the holder was cleaned: err %v existing %v id %v; want new %s", err, res.Existing, res.Task, p.ID)
	}
	_, err = f.Store.TaskGet(f.Ctx(), first.ID)
	wantErr(t, "TaskGet of the cleaned task", err, rota.ErrNotFound)
	diff(t, "new keyed task", inserted(p), f.Get(p.ID))
}

// idempotencyRerunInBatch checks reruns in one batch: the first item naming
// a finished key reruns it, a later one finds it unfinished.
func idempotencyRerunInBatch(t *testing.T, f *Fixture) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	run := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Succeed("w1", run.RunID, f.At(sec(2)))
	a := keyed(f, kindK, "x", 10)
	a.RerunIfFinished = true
	b := keyed(f, kindK, "x", 11)
	b.RerunIfFinished = true
	c := keyed(f, kindK, "y", 12)
	c.RerunIfFinished = true
	res, err := f.Store.TaskInsertMany(f.Ctx(), []store.TaskInsertParams{a, b, c})
	if err != nil {
		t.Fatalf("TaskInsertMany: %v", err)
	}
	type outcome struct {
		ID              string
		Existing, Rerun bool
	}
	got := make([]outcome, len(res))
	for i, r := range res {
		got[i] = outcome{r.Task.ID, r.Existing, r.Rerun}
	}
	diff(t, "batch outcomes", []outcome{{first.ID, true, true}, {first.ID, true, false}, {c.ID, false, false}}, got)
	wantStatus(t, f.Get(first.ID), rota.StatusScheduled)
}

// idempotencyRerunConcurrent checks that concurrent reruns of one finished
// task apply once: one caller is told Rerun, every caller gets the task.
func idempotencyRerunConcurrent(t *testing.T, f *Fixture) {
	first := f.Insert(keyed(f, kindK, "x", 0))
	run := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Succeed("w1", run.RunID, f.At(sec(2)))
	const n = 20
	results := make([]store.TaskInsertResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := keyed(f, kindK, "x", 10+i)
		p.RerunIfFinished = true
		wg.Go(func() { results[i], errs[i] = f.Store.TaskInsert(f.Ctx(), p) })
	}
	wg.Wait()
	reruns := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("insert %d: %v", i, errs[i])
		}
		if r.Task.ID != first.ID || !r.Existing {
			t.Fatalf("insert %d: id %s existing %v, want existing %s", i, r.Task.ID, r.Existing, first.ID)
		}
		if r.Rerun {
			reruns++
		}
	}
	if reruns != 1 {
		t.Fatalf("%d inserts reran the task, want exactly 1", reruns)
	}
	if got := f.Claim("w1", f.At(sec(40)), 10, kindK); len(got.Runs) != 1 {
		t.Fatalf("claim after the reruns: %d runs, want 1", len(got.Runs))
	}
}

// idempotencyKeyIsPerKind is the KeyIsPerKind subtest of testIdempotency.
func idempotencyKeyIsPerKind(t *testing.T, f *Fixture) {
	a := f.Insert(keyed(f, "a", "x", 0))
	p := keyed(f, "b", "x", 1)
	res, err := f.Store.TaskInsert(f.Ctx(), p)
	if err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	if res.Existing || res.Task.ID != p.ID {
		t.Fatalf("key x in another kind: Existing %v id %s, want new %s", res.Existing, res.Task.ID, p.ID)
	}
	diff(t, "tasks with key x", []string{p.ID, a.ID}, ids(f.ListAll(store.TaskListParams{Key: "x"})))
}

// idempotencyConcurrent is the Concurrent subtest of testIdempotency.
func idempotencyConcurrent(t *testing.T, f *Fixture) {
	// 50 concurrent inserts of one kind+key yield exactly one task; every
	// caller gets it and exactly one caller is told it is new.
	const n = 50
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = keyed(f, kindK, "same", i)
		ps[i].Now = f.At(sec(1)) // ids still differ
		ps[i].RunAt = f.At(sec(1))
	}
	var wg sync.WaitGroup
	results := make([]store.TaskInsertResult, n)
	errs := make([]error, n)
	for i := range ps {
		wg.Go(func() {
			results[i], errs[i] = f.Store.TaskInsert(f.Ctx(), ps[i])
		})
	}
	wg.Wait()
	fresh := 0
	var winner string
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("insert %d: %v", i, errs[i])
		}
		if !r.Existing {
			fresh++
			winner = r.Task.ID
		}
	}
	if fresh != 1 {
		t.Fatalf("%d inserts reported a new task, want exactly 1", fresh)
	}
	if !slices.ContainsFunc(ps, func(p store.TaskInsertParams) bool { return p.ID == winner }) {
		t.Fatalf("the new task's id %s is none of the inserted ids", winner)
	}
	for i, r := range results {
		if r.Task.ID != winner {
			t.Fatalf("insert %d returned task %s, want %s", i, r.Task.ID, winner)
		}
	}
	diff(t, "tasks with key same", []string{winner}, ids(f.ListAll(store.TaskListParams{Key: "same"})))
}

// idempotencyManyDuplicateInBatch is the ManyDuplicateInBatch subtest of testIdempotency.
func idempotencyManyDuplicateInBatch(t *testing.T, f *Fixture) {
	pre := f.Insert(keyed(f, kindK, "y", 0))
	a := keyed(f, kindK, "x", 1)
	b := f.Params(kindK, f.At(sec(2)))
	c := keyed(f, kindK, "x", 3)
	d := keyed(f, kindK, "y", 4)
	e := keyed(f, "other", "x", 5)
	res, err := f.Store.TaskInsertMany(f.Ctx(), []store.TaskInsertParams{a, b, c, d, e})
	if err != nil {
		t.Fatalf("TaskInsertMany: %v", err)
	}
	if len(res) != 5 {
		t.Fatalf("TaskInsertMany: %d results, want 5", len(res))
	}
	want := []struct {
		id       string
		existing bool
	}{{a.ID, false}, {b.ID, false}, {a.ID, true}, {pre.ID, true}, {e.ID, false}}
	for i, w := range want {
		if res[i].Task == nil || res[i].Task.ID != w.id || res[i].Existing != w.existing {
			t.Errorf("result %d: %+v, want id %s existing %v", i, res[i], w.id, w.existing)
		}
	}
	for _, id := range []string{c.ID, d.ID} {
		_, err := f.Store.TaskGet(f.Ctx(), id)
		wantErr(t, "TaskGet of a deduplicated batch entry", err, rota.ErrNotFound)
	}
	if n := len(f.ListAll(store.TaskListParams{})); n != 4 {
		t.Fatalf("store holds %d tasks, want 4 (pre, a, b, e)", n)
	}
}
