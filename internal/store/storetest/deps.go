package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func testDeps(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "ChainReleasedOnSuccess", depsChainReleased)
	parallel(t, ns, "FailureCancelsDownstream", depsFailureCancels)
	parallel(t, ns, "StopCancelsDownstream", depsStopCancels)
	parallel(t, ns, "RetryDoesNotCancel", depsRetryDoesNotCancel)
	parallel(t, ns, "AlreadyDone", depsAlreadyDone)
	parallel(t, ns, "Unknown", depsUnknown)
	parallel(t, ns, "BatchItems", depsBatchItems)
	parallel(t, ns, "ListFilter", depsListFilter)
	parallel(t, ns, "InsertRacesParentEnd", depsInsertRacesParentEnd)
}

// depsInsertRacesParentEnd: dependents inserted while their parent
// succeeds are never left WAITING for a parent that already ended.
func depsInsertRacesParentEnd(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	const n = 20
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = f.Params("child", f.At(sec(2)))
		ps[i].DependsOn = []string{a.ID}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for i := range ps {
		wg.Go(func() {
			if _, err := f.Store.TaskInsert(f.Ctx(), ps[i]); err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() {
		if _, err := f.Store.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Success: true,
			Now: f.At(sec(2))}); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, p := range ps {
		depStatus(f, p.ID, rota.StatusScheduled)
	}
	checkInvariants(f)
}

// checkInvariants runs the backend's invariant check when it has one.
func checkInvariants(f *Fixture) {
	f.TB.Helper()
	if c, ok := f.Store.(CheckableStore); ok {
		if err := c.Check(f.Ctx()); err != nil {
			f.TB.Fatalf("Check: %v", err)
		}
	}
}

func depStatus(f *Fixture, id string, want rota.Status) *rota.Task {
	f.TB.Helper()
	got := f.Get(id)
	if got.Status != want {
		f.TB.Fatalf("task %s: status %s (message %q), want %s", id, got.Status, got.Message, want)
	}
	return got
}

// depsChainReleased: a → b → c; b and c wait; each is claimable only once
// its parent succeeded; the task reads show parents and children.
func depsChainReleased(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	pb := f.Params(kindK, f.At(sec(1)))
	pb.DependsOn = []string{a.ID}
	b := f.Insert(pb)
	if b.Status != rota.StatusWaiting {
		t.Fatalf("inserted dependent: status %s, want WAITING", b.Status)
	}
	pc := f.Params(kindK, f.At(sec(2)))
	pc.DependsOn = []string{b.ID, a.ID}
	c := f.Insert(pc)
	checkInvariants(f)

	got := depStatus(f, b.ID, rota.StatusWaiting)
	if !slices.Equal(got.DependsOn, []string{a.ID}) || !slices.Equal(got.Dependents, []string{c.ID}) {
		t.Fatalf("b: depends_on %v dependents %v; want [%s] [%s]", got.DependsOn, got.Dependents, a.ID, c.ID)
	}
	if got := f.Get(a.ID); !slices.Equal(got.Dependents, []string{b.ID, c.ID}) {
		t.Fatalf("a: dependents %v, want [%s %s]", got.Dependents, b.ID, c.ID)
	}

	ca := f.ClaimOne("w1", f.At(sec(3)), kindK)
	if ca.TaskID != a.ID {
		t.Fatalf("claimed %s, want the parent %s", ca.TaskID, a.ID)
	}
	f.ClaimNone("w1", f.At(sec(3)), kindK)
	f.Succeed("w1", ca.RunID, f.At(sec(4)))
	depStatus(f, b.ID, rota.StatusScheduled)
	depStatus(f, c.ID, rota.StatusWaiting)
	checkInvariants(f)

	cb := f.ClaimOne("w1", f.At(sec(5)), kindK)
	if cb.TaskID != b.ID {
		t.Fatalf("claimed %s, want %s", cb.TaskID, b.ID)
	}
	f.ClaimNone("w1", f.At(sec(5)), kindK)
	f.Succeed("w1", cb.RunID, f.At(sec(6)))
	cc := f.ClaimOne("w1", f.At(sec(7)), kindK)
	if cc.TaskID != c.ID {
		t.Fatalf("claimed %s, want %s", cc.TaskID, c.ID)
	}
	checkInvariants(f)
}

// depsFailureCancels: a final failure of a cancels b and c (a → b → c)
// with reason dependency_failed; an unrelated task is untouched.
func depsFailureCancels(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	pb := f.Params(kindK, f.At(sec(1)))
	pb.DependsOn = []string{a.ID}
	b := f.Insert(pb)
	pc := f.Params(kindK, f.At(sec(2)))
	pc.DependsOn = []string{b.ID}
	c := f.Insert(pc)
	other := f.InsertNew("other", f.At(sec(2)))

	ca := f.ClaimOne("w1", f.At(sec(3)), kindK)
	f.Complete(store.RunCompleteParams{RunID: ca.RunID, WorkerID: "w1", Message: "boom", Now: f.At(sec(4))})
	for _, id := range []string{b.ID, c.ID} {
		got := depStatus(f, id, rota.StatusCanceled)
		if !strings.HasPrefix(got.Message, store.DependencyFailed) || !got.EndTime.Equal(f.At(sec(4))) {
			t.Fatalf("task %s: message %q end %s; want %s… at 4s", id, got.Message, f.rel(got.EndTime), store.DependencyFailed)
		}
	}
	depStatus(f, other.ID, rota.StatusScheduled)
	f.ClaimNone("w1", f.At(sec(5)), kindK)
	checkInvariants(f)
}

// depsStopCancels: stopping a waiting parent cancels its dependents.
func depsStopCancels(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	pb := f.Params(kindK, f.At(sec(1)))
	pb.DependsOn = []string{a.ID}
	b := f.Insert(pb)
	pc := f.Params(kindK, f.At(sec(2)))
	pc.DependsOn = []string{b.ID}
	c := f.Insert(pc)
	f.stopTask(b.ID, f.At(sec(3)))
	depStatus(f, b.ID, rota.StatusCanceled)
	got := depStatus(f, c.ID, rota.StatusCanceled)
	if !strings.HasPrefix(got.Message, store.DependencyFailed) {
		t.Fatalf("c: message %q, want %s…", got.Message, store.DependencyFailed)
	}
	depStatus(f, a.ID, rota.StatusScheduled)
	checkInvariants(f)
}

// depsRetryDoesNotCancel: a failure that will be retried is not the end.
func depsRetryDoesNotCancel(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	pb := f.Params(kindK, f.At(sec(1)))
	pb.DependsOn = []string{a.ID}
	b := f.Insert(pb)
	ca := f.ClaimOne("w1", f.At(sec(2)), kindK)
	f.Fail("w1", ca.RunID, f.At(sec(3)), nil)
	depStatus(f, b.ID, rota.StatusWaiting)
	ca = f.ClaimOne("w1", f.At(sec(4)), kindK)
	if ca.TaskID != a.ID {
		t.Fatalf("claimed %s, want the retried parent %s", ca.TaskID, a.ID)
	}
	f.Succeed("w1", ca.RunID, f.At(sec(5)))
	depStatus(f, b.ID, rota.StatusScheduled)
	checkInvariants(f)
}

// depsAlreadyDone: a dependency that already succeeded is no wait; one
// that already failed cancels the new task at once.
func depsAlreadyDone(t *testing.T, f *Fixture) {
	ok := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.Succeed("w1", c.RunID, f.At(sec(2)))
	bad := f.InsertNew(kindK, f.At(sec(3)))
	c = f.ClaimOne("w1", f.At(sec(4)), kindK)
	f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Message: "boom", Now: f.At(sec(5))})

	p := f.Params(kindK, f.At(sec(6)))
	p.DependsOn = []string{ok.ID}
	if got := f.Insert(p); got.Status != rota.StatusScheduled {
		t.Fatalf("task depending on a succeeded one: status %s, want SCHEDULED", got.Status)
	}
	p = f.Params(kindK, f.At(sec(7)))
	p.DependsOn = []string{ok.ID, bad.ID}
	got := f.Insert(p)
	if got.Status != rota.StatusCanceled || !strings.HasPrefix(got.Message, store.DependencyFailed) {
		t.Fatalf("task depending on a failed one: status %s message %q, want CANCELED %s…", got.Status, got.Message, store.DependencyFailed)
	}
	checkInvariants(f)
}

// depsUnknown: an unknown dependency or a later item is ErrInvalid on
// depends_on and nothing is stored.
func depsUnknown(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.DependsOn = []string{f.NewTaskID(f.At(0))}
	_, err := f.Store.TaskInsert(f.Ctx(), p)
	var re *rota.Error
	if !errors.As(err, &re) || re.Code != rota.CodeInvalid || re.Field != "depends_on" {
		t.Fatalf("insert with an unknown dependency: err %v, want invalid on depends_on", err)
	}
	p1, p2 := f.Params(kindK, f.At(0)), f.Params(kindK, f.At(0))
	p1.DependsOnItems = []int{1}
	_, err = f.Store.TaskInsertMany(f.Ctx(), []store.TaskInsertParams{p1, p2})
	if !errors.As(err, &re) || re.Code != rota.CodeInvalid || re.Field != "depends_on" {
		t.Fatalf("insert depending on a later item: err %v, want invalid on depends_on", err)
	}
	if got := f.ListAll(store.TaskListParams{}); len(got) != 0 {
		t.Fatalf("%d tasks stored after refused inserts, want 0", len(got))
	}
}

// depsBatchItems: a graph in one TaskInsertMany, by item index, keyed items
// included (a keyed item answered by an existing task stands for it).
func depsBatchItems(t *testing.T, f *Fixture) {
	prev := f.Params(kindK, f.At(0))
	prev.Key = "root"
	root := f.Insert(prev)

	p0 := f.Params(kindK, f.At(sec(1)))
	p0.Key = "root"
	p1 := f.Params(kindK, f.At(sec(1)))
	p1.DependsOnItems = []int{0}
	p2 := f.Params(kindK, f.At(sec(1)))
	p2.DependsOnItems = []int{0, 1}
	res, err := f.Store.TaskInsertMany(f.Ctx(), []store.TaskInsertParams{p0, p1, p2})
	if err != nil {
		t.Fatalf("TaskInsertMany: %v", err)
	}
	if !res[0].Existing || res[0].Task.ID != root.ID {
		t.Fatalf("item 0: %+v, want the existing keyed task %s", res[0], root.ID)
	}
	for i, want := range [][]string{nil, {root.ID}, {root.ID, p1.ID}} {
		if i == 0 {
			continue
		}
		got := depStatus(f, res[i].Task.ID, rota.StatusWaiting)
		slices.Sort(want)
		if !slices.Equal(got.DependsOn, want) {
			t.Fatalf("item %d: depends_on %v, want %v", i, got.DependsOn, want)
		}
	}
	c := f.ClaimOne("w1", f.At(sec(2)), kindK)
	f.Succeed("w1", c.RunID, f.At(sec(3)))
	c = f.ClaimOne("w1", f.At(sec(4)), kindK)
	if c.TaskID != p1.ID {
		t.Fatalf("claimed %s, want item 1 %s", c.TaskID, p1.ID)
	}
	f.ClaimNone("w1", f.At(sec(4)), kindK)
	checkInvariants(f)
}

// depsListFilter: TaskList's DependsOn lists a task's children.
func depsListFilter(t *testing.T, f *Fixture) {
	a := f.InsertNew(kindK, f.At(0))
	f.InsertNew(kindK, f.At(sec(1)))
	var want []string
	for i := range 3 {
		p := f.Params(kindK, f.At(sec(2+i)))
		p.DependsOn = []string{a.ID}
		want = append(want, f.Insert(p).ID)
	}
	slices.Reverse(want)
	var got []string
	for _, task := range f.ListAll(store.TaskListParams{DependsOn: a.ID, Limit: 2}) {
		got = append(got, task.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("TaskList(depends_on %s) = %v, want %v", a.ID, got, want)
	}
	if got := f.ListAll(store.TaskListParams{Status: rota.StatusWaiting}); len(got) != 3 {
		t.Fatalf("TaskList(status WAITING): %d tasks, want 3", len(got))
	}
}
