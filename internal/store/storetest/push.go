package storetest

import (
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

func testPush(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "KindDispatch", pushKindDispatch)
	parallel(t, ns, "Register", pushRegister)
	parallel(t, ns, "RegisterAgain", pushRegisterAgain)
	parallel(t, ns, "Stopped", pushStopped)
	parallel(t, ns, "Seen", pushSeen)
	parallel(t, ns, "Pruned", pushPruned)
}

// register registers a push worker; it fails the test on error.
func (f *Fixture) register(id string, capacity int, now time.Time, kinds ...string) *store.PushWorker {
	f.TB.Helper()
	w, err := f.Store.WorkerRegister(f.Ctx(), store.WorkerRegisterParams{
		WorkerID: id, Kinds: kinds, Address: pushAddr(id), Capacity: capacity, Now: now,
	})
	must(f.TB, "WorkerRegister("+id+")", err)
	return w
}

// pushWorkers lists the push workers; it fails the test on error.
func (f *Fixture) pushWorkers() []store.PushWorker {
	f.TB.Helper()
	ws, err := f.Store.PushWorkerList(f.Ctx())
	must(f.TB, "PushWorkerList", err)
	return ws
}

func pushAddr(id string) string { return "http://" + id + ".example:9000/rota" }

// workerByID returns a worker of WorkerList at now; it fails the test when
// there is none.
func (f *Fixture) workerByID(id string, now time.Time) rota.Worker {
	f.TB.Helper()
	ws, err := f.Store.WorkerList(f.Ctx(), now)
	must(f.TB, "WorkerList", err)
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	f.TB.Fatalf("worker %s not listed", id)
	return rota.Worker{}
}

// pushKindDispatch: a kind's dispatch mode is pull by default, push once
// set, and kept by changes of other settings.
func pushKindDispatch(t *testing.T, f *Fixture) {
	f.InsertNew("a", f.At(0))
	if got := f.getKind("a").Dispatch; got != rota.DispatchPull {
		t.Fatalf("dispatch of a kind made by an insert = %q, want pull", got)
	}
	if got := f.upsertKind(store.KindUpsertParams{Name: "b"}).Dispatch; got != rota.DispatchPull {
		t.Fatalf("dispatch of a new kind = %q, want pull", got)
	}
	k := f.upsertKind(store.KindUpsertParams{Name: "a", Dispatch: ptr(rota.DispatchPush)})
	if k.Dispatch != rota.DispatchPush {
		t.Fatalf("KindUpsert(dispatch push) = %q", k.Dispatch)
	}
	f.upsertKind(store.KindUpsertParams{Name: "a", Paused: ptr(true)})
	if got := f.getKind("a").Dispatch; got != rota.DispatchPush {
		t.Fatalf("dispatch after a change of paused = %q, want push", got)
	}
	if got := f.upsertKind(store.KindUpsertParams{Name: "c", Dispatch: ptr(rota.DispatchPush)}).Dispatch; got != rota.DispatchPush {
		t.Fatalf("dispatch of a new push kind = %q", got)
	}
	kinds, err := f.Store.KindList(f.Ctx())
	must(t, "KindList", err)
	got := map[string]string{}
	for _, k := range kinds {
		got[k.Name] = k.Dispatch
	}
	diff(t, "dispatch by kind", map[string]string{"a": "push", "b": "pull", "c": "push"}, got)
	f.upsertKind(store.KindUpsertParams{Name: "a", Dispatch: ptr(rota.DispatchPull)})
	if got := f.getKind("a").Dispatch; got != rota.DispatchPull {
		t.Fatalf("dispatch set back = %q, want pull", got)
	}
}

// pushRegister: a registration makes a worker listed with its address and
// kinds, and a push worker with its capacity whose claims count as
// running.
func pushRegister(t *testing.T, f *Fixture) {
	got := f.register("p1", 3, f.At(sec(1)), "a", "b")
	want := store.PushWorker{WorkerID: "p1", Address: pushAddr("p1"), Kinds: []string{"a", "b"}, Capacity: 3,
		RegisteredAt: f.At(sec(1))}
	diff(t, "WorkerRegister", want, *got)
	w := f.workerByID("p1", f.At(sec(2)))
	if w.Address != pushAddr("p1") || w.Status != rota.WorkerActive || len(w.Kinds) != 2 {
		t.Fatalf("listed worker = %+v, want address %s, active, kinds a b", w, pushAddr("p1"))
	}
	f.InsertNew("a", f.At(sec(1)))
	f.InsertNew("a", f.At(sec(1)))
	f.Claim("p1", f.At(sec(3)), 2, "a")
	want.Running = 2
	diff(t, "PushWorkerList after two claims", []store.PushWorker{want}, f.pushWorkers())
	if free := f.pushWorkers()[0].Free(); free != 1 {
		t.Fatalf("Free = %d, want 1", free)
	}
}

// pushRegisterAgain: a new registration of the same id replaces the
// address, capacity and kinds.
func pushRegisterAgain(t *testing.T, f *Fixture) {
	f.register("p1", 3, f.At(sec(1)), "a")
	f.register("p2", 1, f.At(sec(1)), "a")
	_, err := f.Store.WorkerRegister(f.Ctx(), store.WorkerRegisterParams{
		WorkerID: "p1", Kinds: []string{"b"}, Address: "http://new.example:1/", Capacity: 5, Now: f.At(sec(2)),
	})
	must(t, "WorkerRegister again", err)
	diff(t, "PushWorkerList", []store.PushWorker{
		{WorkerID: "p1", Address: "http://new.example:1/", Kinds: []string{"b"}, Capacity: 5, RegisteredAt: f.At(sec(2))},
		{WorkerID: "p2", Address: pushAddr("p2"), Kinds: []string{"a"}, Capacity: 1, RegisteredAt: f.At(sec(1))},
	}, f.pushWorkers())
}

// pushStopped: a stopped or deregistered push worker takes nothing; a new
// registration ends a deregistration, not a stop request.
func pushStopped(t *testing.T, f *Fixture) {
	f.register("p1", 2, f.At(0), "a")
	f.register("p2", 2, f.At(0), "a")
	_, err := f.Store.WorkerStop(f.Ctx(), "p1", f.At(sec(1)))
	must(t, "WorkerStop", err)
	_, err = f.Store.WorkerDeregister(f.Ctx(), "p2", f.At(sec(1)))
	must(t, "WorkerDeregister", err)
	for _, w := range f.pushWorkers() {
		if !w.Stopped || w.Free() != 0 {
			t.Fatalf("worker %s: stopped %v, free %d; want stopped, 0 free", w.WorkerID, w.Stopped, w.Free())
		}
	}
	f.register("p1", 2, f.At(sec(2)), "a")
	f.register("p2", 2, f.At(sec(2)), "a")
	stopped := map[string]bool{}
	for _, w := range f.pushWorkers() {
		stopped[w.WorkerID] = w.Stopped
	}
	diff(t, "stopped after registering again", map[string]bool{"p1": true, "p2": false}, stopped)
}

// pushSeen: a health check's sighting keeps a push worker active.
func pushSeen(t *testing.T, f *Fixture) {
	f.register("p1", 1, f.At(0), "a")
	f.register("p2", 1, f.At(0), "a")
	late := f.At(store.WorkerLiveness + sec(10))
	if s := f.workerByID("p1", late).Status; s != rota.WorkerLost {
		t.Fatalf("status before a sighting = %s, want lost", s)
	}
	must(t, "PushWorkersSeen", f.Store.PushWorkersSeen(f.Ctx(), []string{"p1", "unknown"}, f.At(store.WorkerLiveness)))
	must(t, "PushWorkersSeen(none)", f.Store.PushWorkersSeen(f.Ctx(), nil, f.At(store.WorkerLiveness)))
	if s := f.workerByID("p1", late).Status; s != rota.WorkerActive {
		t.Fatalf("status after a sighting = %s, want active", s)
	}
	if s := f.workerByID("p2", late).Status; s != rota.WorkerLost {
		t.Fatalf("status of a worker not seen = %s, want lost", s)
	}
	w := f.workerByID("p1", late)
	wantInstant(t, "last seen", w.LastSeen, f.At(store.WorkerLiveness))
}

// pushPruned: the registration of a pruned worker is not listed.
func pushPruned(t *testing.T, f *Fixture) {
	f.register("p1", 1, f.At(0), "a")
	f.register("p2", 1, f.At(sec(100)), "a")
	n, err := f.Store.WorkerPrune(f.Ctx(), store.WorkerPruneParams{SeenBefore: f.At(sec(50))})
	must(t, "WorkerPrune", err)
	if n != 1 {
		t.Fatalf("pruned %d workers, want 1", n)
	}
	ws := f.pushWorkers()
	if len(ws) != 1 || ws[0].WorkerID != "p2" {
		t.Fatalf("PushWorkerList after the prune = %+v, want p2 only", ws)
	}
}
