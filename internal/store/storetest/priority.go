package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// weightedOrder is the documented dispatch order for priority factor 2
// and 9 tasks per level, claimed one at a time.
func weightedOrder() []string {
	return strings.Split("high_1,high_2,high_3,high_4,mid_1,mid_2,low_1,"+
		"high_5,high_6,high_7,high_8,mid_3,mid_4,low_2,"+
		"high_9,mid_5,mid_6,low_3,"+
		"mid_7,mid_8,low_4,"+
		"mid_9,low_5,"+
		"low_6,low_7,low_8,low_9", ",")
}

// named inserts tasks of kind, interleaving the levels (low_1, mid_1,
// high_1, low_2, …: the reverse of the dispatch order within each step, so
// insertion order alone cannot produce the expected order), n[level] tasks
// per level, each inserted 1ms after the previous one with RunAt = its
// insertion time. It returns the task names by id.
func (f *Fixture) named(kind string, nHigh, nMid, nLow int) map[string]string {
	f.TB.Helper()
	names := map[string]string{}
	counts := map[rota.Priority]int{rota.PriorityHigh: nHigh, rota.PriorityMid: nMid, rota.PriorityLow: nLow}
	step := 0
	for i := 1; i <= max(nHigh, nMid, nLow); i++ {
		for _, prio := range []rota.Priority{rota.PriorityLow, rota.PriorityMid, rota.PriorityHigh} {
			if i > counts[prio] {
				continue
			}
			p := f.Params(kind, f.At(time.Duration(step)*time.Millisecond))
			p.Priority = prio
			p.Payload = fmt.Appendf(nil, `{"name":"%s_%d"}`, prio, i)
			f.Insert(p)
			names[p.ID] = fmt.Sprintf("%s_%d", prio, i)
			step++
		}
	}
	return names
}

// drain claims kind with one worker, perClaim tasks per claim, succeeding each
// run before the next claim, until a claim comes back empty. It returns the
// names of the tasks in the order they were handed out; within one claim
// the runs are taken in the order the store returned them.
func (f *Fixture) drain(kind string, perClaim int, names map[string]string, now time.Time) []string {
	f.TB.Helper()
	var order []string
	for range len(names) + 1 {
		res := f.Claim("w1", now, perClaim, kind)
		if len(res.Runs) == 0 {
			return order
		}
		for _, r := range res.Runs {
			order = append(order, names[r.TaskID])
		}
		for _, r := range res.Runs {
			f.Succeed("w1", r.RunID, now)
		}
	}
	f.TB.Fatalf("claims of %d tasks do not end", len(names))
	return nil
}

func testPriority(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "WeightedOrder", priorityWeightedOrder)

	parallel(t, ns, "WeightedOrderBatches", priorityWeightedOrderBatches)

	parallel(t, ns, "Factor3", priorityFactor3)

	parallel(t, ns, "FactorChangedLater", priorityFactorChangedLater)

	parallel(t, ns, "SkipsEmptyLevel", prioritySkipsEmptyLevel)

	parallel(t, ns, "OnlyLow", priorityOnlyLow)

	parallel(t, ns, "RunAtThenID", priorityRunAtThenID)

	parallel(t, ns, "RetriedTaskKeepsLevel", priorityRetriedTaskKeepsLevel)

	parallel(t, ns, "KindsInOrderGiven", priorityKindsInOrderGiven)

	parallel(t, ns, "KindsFillMax", priorityKindsFillMax)

	parallel(t, ns, "RoundPerKind", priorityRoundPerKind)
}

// priorityWeightedOrder is the WeightedOrder subtest of testPriority.
func priorityWeightedOrder(t *testing.T, f *Fixture) {
	names := f.named(kindK, 9, 9, 9)
	diff(t, "dispatch order, factor 2, one claim at a time", weightedOrder(), f.drain(kindK, 1, names, f.At(time.Hour)))
}

// priorityWeightedOrderBatches is the WeightedOrderBatches subtest of testPriority.
func priorityWeightedOrderBatches(t *testing.T, f *Fixture) {
	// The same order in claims of up to 3; the suite does not require an
	// order among the runs of one claim, only which tasks each claim got.
	names := f.named(kindK, 9, 9, 9)
	want := weightedOrder()
	now := f.At(time.Hour)
	for i := 0; i < len(want); i += 3 {
		res := f.Claim("w1", now, 3, kindK)
		var got []string
		for _, r := range res.Runs {
			got = append(got, names[r.TaskID])
		}
		diff(t, fmt.Sprintf("claim %d (tasks %d-%d)", i/3+1, i+1, i+3), sorted(want[i:i+3]), sorted(got))
		for _, r := range res.Runs {
			f.Succeed("w1", r.RunID, now)
		}
	}
	f.ClaimNone("w1", now, kindK)
}

// priorityFactor3 is the Factor3 subtest of testPriority.
func priorityFactor3(t *testing.T, f *Fixture) {
	factor := 3
	_, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, PriorityFactor: &factor})
	must(t, "KindUpsert", err)
	names := f.named(kindK, 10, 4, 2)
	want := strings.Split("high_1,high_2,high_3,high_4,high_5,high_6,high_7,high_8,high_9,mid_1,mid_2,mid_3,low_1,"+
		"high_10,mid_4,low_2", ",")
	diff(t, "dispatch order, factor 3 (9:3:1)", want, f.drain(kindK, 1, names, f.At(time.Hour)))
}

// priorityFactorChangedLater is the FactorChangedLater subtest of testPriority.
func priorityFactorChangedLater(t *testing.T, f *Fixture) {
	// The factor is read at claim time: a kind created by an insert with
	// the default factor, then set to 1, serves 1:1:1.
	names := f.named(kindK, 3, 3, 3)
	one := 1
	_, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, PriorityFactor: &one})
	must(t, "KindUpsert", err)
	want := strings.Split("high_1,mid_1,low_1,high_2,mid_2,low_2,high_3,mid_3,low_3", ",")
	diff(t, "dispatch order, factor 1", want, f.drain(kindK, 1, names, f.At(time.Hour)))
}

// prioritySkipsEmptyLevel is the SkipsEmptyLevel subtest of testPriority.
func prioritySkipsEmptyLevel(t *testing.T, f *Fixture) {
	names := f.named(kindK, 0, 6, 3)
	want := strings.Split("mid_1,mid_2,low_1,mid_3,mid_4,low_2,mid_5,mid_6,low_3", ",")
	diff(t, "dispatch order without high tasks", want, f.drain(kindK, 1, names, f.At(time.Hour)))
}

// priorityOnlyLow is the OnlyLow subtest of testPriority.
func priorityOnlyLow(t *testing.T, f *Fixture) {
	names := f.named(kindK, 0, 0, 3)
	diff(t, "dispatch order with low tasks only", []string{"low_1", "low_2", "low_3"}, f.drain(kindK, 1, names, f.At(time.Hour)))
}

// priorityRunAtThenID is the RunAtThenID subtest of testPriority.
func priorityRunAtThenID(t *testing.T, f *Fixture) {
	// Within a level: earlier RunAt first, then the smaller id.
	late := f.Params(kindK, f.At(0))
	late.RunAt = f.At(sec(2))
	f.Insert(late)
	early1 := f.Params(kindK, f.At(sec(1)))
	early1.RunAt = f.At(sec(1))
	f.Insert(early1)
	early2 := f.Params(kindK, f.At(sec(1)).Add(time.Millisecond))
	early2.RunAt = f.At(sec(1))
	f.Insert(early2)
	var got []string
	for range 3 {
		c := f.ClaimOne("w1", f.At(sec(3)), kindK)
		got = append(got, c.TaskID)
		f.Succeed("w1", c.RunID, f.At(sec(3)))
	}
	diff(t, "order within a level", []string{early1.ID, early2.ID, late.ID}, got)
}

// priorityRetriedTaskKeepsLevel is the RetriedTaskKeepsLevel subtest of testPriority.
func priorityRetriedTaskKeepsLevel(t *testing.T, f *Fixture) {
	// A retried task goes back into its level ordered by its new RunAt.
	a := f.InsertNew(kindK, f.At(0))
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	if c.TaskID != a.ID {
		t.Fatalf("claimed %s, want %s", c.TaskID, a.ID)
	}
	b := f.InsertNew(kindK, f.At(sec(2)))
	f.Fail("w1", c.RunID, f.At(sec(3)), nil) // a: RunAt 3s, b: RunAt 2s
	if got := f.ClaimOne("w1", f.At(sec(4)), kindK).TaskID; got != b.ID {
		t.Fatalf("claimed %s, want %s (earlier RunAt than the retried task)", got, b.ID)
	}
	if got := f.ClaimOne("w1", f.At(sec(4)), kindK).TaskID; got != a.ID {
		t.Fatalf("claimed %s, want the retried task %s", got, a.ID)
	}
}

// priorityKindsInOrderGiven is the KindsInOrderGiven subtest of testPriority.
func priorityKindsInOrderGiven(t *testing.T, f *Fixture) {
	low := f.Params("b", f.At(0))
	low.Priority = rota.PriorityLow
	f.Insert(low)
	high := f.Params("a", f.At(sec(1)))
	high.Priority = rota.PriorityHigh
	f.Insert(high)
	for i := range 3 {
		f.InsertNew("a", f.At(sec(2+i)))
	}

	res := f.Claim("w1", f.At(sec(10)), 1, "b", "a")
	if len(res.Runs) != 1 || res.Runs[0].TaskID != low.ID || res.Runs[0].Kind != "b" {
		t.Fatalf("claim of kinds [b a]: %+v, want the low task of b first", res.Runs)
	}
	res = f.Claim("w2", f.At(sec(10)), 3, "b", "a")
	if len(res.Runs) != 3 {
		t.Fatalf("claim of kinds [b a] max 3: %d runs, want 3 (b's only task is taken: all from a)", len(res.Runs))
	}
	if !slices.ContainsFunc(res.Runs, func(r rota.ClaimedRun) bool { return r.TaskID == high.ID }) {
		t.Fatalf("claim of a: the high task %s was not handed out", high.ID)
	}
	for _, r := range res.Runs {
		if r.Kind != "a" {
			t.Fatalf("claimed a task of kind %s, want a", r.Kind)
		}
	}
}

// priorityKindsFillMax is the KindsFillMax subtest of testPriority.
func priorityKindsFillMax(t *testing.T, f *Fixture) {
	// One claim over several kinds takes what the first kind has, then
	// goes on with the next.
	b := f.InsertNew("b", f.At(0))
	for i := range 5 {
		f.InsertNew("a", f.At(sec(1+i)))
	}
	res := f.Claim("w1", f.At(sec(10)), 3, "b", "a")
	if len(res.Runs) != 3 {
		t.Fatalf("claim max 3 over [b a]: %d runs, want 3", len(res.Runs))
	}
	kinds := map[string]int{}
	hasB := false
	for _, r := range res.Runs {
		kinds[r.Kind]++
		hasB = hasB || r.TaskID == b.ID
	}
	if !hasB || kinds["b"] != 1 || kinds["a"] != 2 {
		t.Fatalf("claim max 3 over [b a]: kinds %v, want b's only task and 2 of a", kinds)
	}
}

// priorityRoundPerKind is the RoundPerKind subtest of testPriority.
func priorityRoundPerKind(t *testing.T, f *Fixture) {
	// Each kind keeps its own position in the round.
	na := f.named("a", 5, 2, 1)
	nb := f.named("b", 5, 2, 1)
	names := map[string]string{}
	for id, n := range na {
		names[id] = "a." + n
	}
	for id, n := range nb {
		names[id] = "b." + n
	}
	now := f.At(time.Hour)
	var got []string
	for range 3 {
		for _, kind := range []string{"a", "b"} {
			c := f.ClaimOne("w1", now, kind)
			got = append(got, names[c.TaskID])
			f.Succeed("w1", c.RunID, now)
		}
	}
	want := []string{"a.high_1", "b.high_1", "a.high_2", "b.high_2", "a.high_3", "b.high_3"}
	diff(t, "alternating kinds", want, got)
	got = nil
	for range 4 {
		c := f.ClaimOne("w1", now, "a")
		got = append(got, names[c.TaskID])
		f.Succeed("w1", c.RunID, now)
	}
	diff(t, "kind a alone", []string{"a.high_4", "a.mid_1", "a.mid_2", "a.low_1"}, got)
}

func testPinning(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "OnlyAllowedWorkers", pinningOnlyAllowedWorkers)

	parallel(t, ns, "PinnedFirst", pinningPinnedFirst)

	parallel(t, ns, "PinnedForOtherWorkerDoesNotJump", pinningPinnedForOtherWorkerDoesNotJump)

	parallel(t, ns, "PinnedOnly", pinningPinnedOnly)

	parallel(t, ns, "PinnedOnlyOrder", pinningPinnedOnlyOrder)

	parallel(t, ns, "PinnedOnlyBatch", pinningPinnedOnlyBatch)

	parallel(t, ns, "OrdinaryClaimGetsPinnedAndUnpinned", pinningOrdinaryClaimGetsPinnedAndUnpinned)

	parallel(t, ns, "PinnedOnlyRateLimited", pinningPinnedOnlyRateLimited)

	parallel(t, ns, "LevelBeforePinning", pinningLevelBeforePinning)

	for _, success := range []bool{false, true} {
		name := "NarrowedRunFails"
		if success {
			name = "NarrowedRunSucceeds"
		}
		parallel(t, ns, name, func(t *testing.T, f *Fixture) {
			// Narrowing WorkerIDs away from a running run's worker asks that
			// run to stop; whatever it reports, it ends CANCELED, the failure
			// is not counted (MaxRetries 0 would fail the task otherwise) and
			// the task is claimable at once by an allowed worker.
			p := f.Params(kindK, f.At(0))
			p.MaxRetries = 0
			f.Insert(p)
			c1 := f.ClaimOne("w1", f.At(sec(1)), kindK)
			ws := []string{"w2"}
			upd, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, WorkerIDs: &ws, Now: f.At(sec(2))})
			must(t, "TaskUpdate", err)
			diff(t, "WorkerIDs after update", ws, upd.WorkerIDs)
			wantStatus(t, upd, rota.StatusRunning)

			hb := f.Heartbeat("w1", c1.RunID, f.At(sec(3)))
			if !hb.Stop || hb.Drain {
				t.Fatalf("heartbeat of the narrowed-out run: stop %v drain %v, want stop only", hb.Stop, hb.Drain)
			}
			if r := runByID(t, f.Get(p.ID), c1.RunID); !r.StopRequested || r.Status != rota.StatusRunning {
				t.Fatalf("narrowed-out run before its report: %+v, want RUNNING with StopRequested", r)
			}

			got := f.Complete(store.RunCompleteParams{RunID: c1.RunID, WorkerID: "w1", Success: success, Message: "reported", Retry: true, Now: f.At(sec(4)), Backoff: backoff7})
			wantStatus(t, got, rota.StatusScheduled)
			task := f.Get(p.ID)
			wantStatus(t, task, rota.StatusScheduled)
			if r := runByID(t, task, c1.RunID); r.Status != rota.StatusCanceled {
				t.Fatalf("narrowed-out run ended %s, want CANCELED", r.Status)
			}
			if task.IsSucceed || !task.EndTime.IsZero() {
				t.Fatalf("task after a canceled run: IsSucceed %v EndTime %v", task.IsSucceed, task.EndTime)
			}
			f.ClaimNone("w1", f.At(sec(4)), kindK)
			c2 := f.ClaimOne("w2", f.At(sec(4)), kindK)
			if c2.Attempt != 2 {
				t.Fatalf("claim after the canceled run: attempt %d, want 2", c2.Attempt)
			}
			wantStatus(t, f.Succeed("w2", c2.RunID, f.At(sec(5))), rota.StatusSuccess)
		})
	}

	parallel(t, ns, "WidenedAfterClaim", pinningWidenedAfterClaim)
}

// pinningOnlyAllowedWorkers is the OnlyAllowedWorkers subtest of testPinning.
func pinningOnlyAllowedWorkers(t *testing.T, f *Fixture) {
	p := f.Params(kindK, f.At(0))
	p.WorkerIDs = []string{"w2", "w3"}
	f.Insert(p)
	f.ClaimNone("w1", f.At(sec(1)), kindK)
	c := f.ClaimOne("w2", f.At(sec(1)), kindK)
	if c.TaskID != p.ID {
		t.Fatalf("w2 claimed %s, want %s", c.TaskID, p.ID)
	}
}

// pinningPinnedFirst is the PinnedFirst subtest of testPinning.
func pinningPinnedFirst(t *testing.T, f *Fixture) {
	// Within a level, tasks pinned to the claiming worker come first
	// (then by RunAt, id), even when an unpinned task is older.
	// Among the pinned ones RunAt comes before id: p1 is older but due
	// later than p2.
	unpinned := f.InsertNew(kindK, f.At(0))
	p1 := f.Params(kindK, f.At(sec(1)))
	p1.WorkerIDs = []string{"w1"}
	p1.RunAt = f.At(sec(5))
	f.Insert(p1)
	p2 := f.Params(kindK, f.At(sec(2)))
	p2.WorkerIDs = []string{"w2", "w1"}
	f.Insert(p2)
	p3 := f.Params(kindK, f.At(sec(3)))
	p3.WorkerIDs = []string{"w1"}
	p3.RunAt = f.At(sec(5))
	f.Insert(p3)
	other := f.Params(kindK, f.At(sec(4)))
	other.WorkerIDs = []string{"w2"}
	f.Insert(other)

	var got []string
	for range 4 {
		c := f.ClaimOne("w1", f.At(sec(10)), kindK)
		got = append(got, c.TaskID)
		f.Succeed("w1", c.RunID, f.At(sec(10)))
	}
	diff(t, "w1's order", []string{p2.ID, p1.ID, p3.ID, unpinned.ID}, got)
	f.ClaimNone("w1", f.At(sec(10)), kindK)
	if c := f.ClaimOne("w2", f.At(sec(10)), kindK); c.TaskID != other.ID {
		t.Fatalf("w2 claimed %s, want %s", c.TaskID, other.ID)
	}
}

// pinningPinnedForOtherWorkerDoesNotJump is the PinnedForOtherWorkerDoesNotJump subtest of testPinning.
func pinningPinnedForOtherWorkerDoesNotJump(t *testing.T, f *Fixture) {
	// A task pinned to several workers is "pinned" for each of them; for
	// a worker it does not name it is not claimable at all; an unpinned
	// task does not jump ahead for anybody.
	unpinned := f.InsertNew(kindK, f.At(0))
	p := f.Params(kindK, f.At(sec(1)))
	p.WorkerIDs = []string{"w2"}
	f.Insert(p)
	if c := f.ClaimOne("w1", f.At(sec(2)), kindK); c.TaskID != unpinned.ID {
		t.Fatalf("w1 claimed %s, want the unpinned %s", c.TaskID, unpinned.ID)
	}
	f.ClaimNone("w1", f.At(sec(2)), kindK)
}

// pinningPinnedOnly is the PinnedOnly subtest of testPinning.
func pinningPinnedOnly(t *testing.T, f *Fixture) {
	// A PinnedOnly claim takes the task pinned to its worker and never
	// an unpinned one of the kind, not even an older task of a higher
	// level; nor one pinned to another worker. The unpinned tasks stay
	// for ordinary claims, the same worker's included.
	unpinned := f.Params(kindK, f.At(0))
	unpinned.Priority = rota.PriorityHigh
	f.Insert(unpinned)
	unpinned2 := f.InsertNew(kindK, f.At(sec(1)))
	pinned := f.Params(kindK, f.At(sec(2)))
	pinned.WorkerIDs = []string{"w1"}
	pinned.Priority = rota.PriorityLow
	f.Insert(pinned)
	other := f.Params(kindK, f.At(sec(3)))
	other.WorkerIDs = []string{"w2"}
	f.Insert(other)

	res := f.claimPinned("w1", f.At(sec(10)), 10, kindK)
	diff(t, "w1's PinnedOnly claim", []string{pinned.ID}, claimedIDs(res))
	if !res.RateLimitedUntil.IsZero() || res.Drain {
		t.Fatalf("PinnedOnly claim: RateLimitedUntil %v, Drain %v", res.RateLimitedUntil, res.Drain)
	}
	diff(t, "w1's next PinnedOnly claim", []string(nil), claimedIDs(f.claimPinned("w1", f.At(sec(10)), 10, kindK)))
	wantStatus(t, f.Get(unpinned.ID), rota.StatusScheduled)
	diff(t, "w1's ordinary claim", []string{unpinned.ID, unpinned2.ID}, claimedIDs(f.Claim("w1", f.At(sec(11)), 10, kindK)))
	diff(t, "w2's PinnedOnly claim", []string{other.ID}, claimedIDs(f.claimPinned("w2", f.At(sec(11)), 10, kindK)))
}

// pinningPinnedOnlyOrder is the PinnedOnlyOrder subtest of testPinning.
func pinningPinnedOnlyOrder(t *testing.T, f *Fixture) {
	// Among the tasks pinned to the worker a PinnedOnly claim keeps the
	// dispatch order: levels in weighted rounds, within a level RunAt
	// then id (pHigh1 is older than pHigh2 but due later). Unpinned
	// tasks, older and of every level, are skipped.
	for _, prio := range []rota.Priority{rota.PriorityHigh, rota.PriorityMid, rota.PriorityLow} {
		p := f.Params(kindK, f.At(0))
		p.Priority = prio
		f.Insert(p)
	}
	pin := func(at time.Duration, prio rota.Priority, workers ...string) *rota.Task {
		p := f.Params(kindK, f.At(at))
		p.Priority, p.WorkerIDs = prio, workers
		return f.Insert(p)
	}
	pLow := pin(sec(1), rota.PriorityLow, "w1")
	pMid := pin(sec(2), rota.PriorityMid, "w1")
	p := f.Params(kindK, f.At(sec(3)))
	p.Priority, p.WorkerIDs, p.RunAt = rota.PriorityHigh, []string{"w1"}, f.At(sec(6))
	pHigh1 := f.Insert(p)
	pHigh2 := pin(sec(4), rota.PriorityHigh, "w2", "w1")
	pMid2 := pin(sec(5), rota.PriorityMid, "w1")

	var got []string
	for range 5 {
		res := f.claimPinned("w1", f.At(sec(10)), 1, kindK)
		if len(res.Runs) != 1 {
			t.Fatalf("PinnedOnly claim after %v: %d runs, want 1", got, len(res.Runs))
		}
		got = append(got, res.Runs[0].TaskID)
		f.Succeed("w1", res.Runs[0].RunID, f.At(sec(10)))
	}
	diff(t, "w1's PinnedOnly order", []string{pHigh2.ID, pHigh1.ID, pMid.ID, pMid2.ID, pLow.ID}, got)
	diff(t, "w1's last PinnedOnly claim", []string(nil), claimedIDs(f.claimPinned("w1", f.At(sec(10)), 10, kindK)))
	if n := len(f.Claim("w1", f.At(sec(10)), 10, kindK).Runs); n != 3 {
		t.Fatalf("ordinary claim after the pinned ones: %d runs, want the 3 unpinned", n)
	}
}

// pinningPinnedOnlyBatch is the PinnedOnlyBatch subtest of testPinning.
func pinningPinnedOnlyBatch(t *testing.T, f *Fixture) {
	// One PinnedOnly claim of several tasks hands them out in the same
	// order, and stops at Max.
	f.InsertNew(kindK, f.At(0))
	var want []string
	for i, prio := range []rota.Priority{rota.PriorityLow, rota.PriorityHigh, rota.PriorityMid, rota.PriorityHigh} {
		p := f.Params(kindK, f.At(sec(1+i)))
		p.Priority, p.WorkerIDs = prio, []string{"w1"}
		want = append(want, f.Insert(p).ID)
	}
	want = []string{want[1], want[3], want[2]} // high, high, mid; low is left
	diff(t, "PinnedOnly batch", want, claimedIDs(f.claimPinned("w1", f.At(sec(10)), 3, kindK)))
}

// pinningOrdinaryClaimGetsPinnedAndUnpinned is the OrdinaryClaimGetsPinnedAndUnpinned subtest of testPinning.
func pinningOrdinaryClaimGetsPinnedAndUnpinned(t *testing.T, f *Fixture) {
	// Without PinnedOnly the worker a task is pinned to gets it and the
	// unpinned tasks of the kind alike (pinned first within a level).
	unpinned := f.InsertNew(kindK, f.At(0))
	p := f.Params(kindK, f.At(sec(1)))
	p.WorkerIDs = []string{"w1"}
	pinned := f.Insert(p)
	diff(t, "w1's ordinary claim", []string{pinned.ID, unpinned.ID}, claimedIDs(f.Claim("w1", f.At(sec(2)), 10, kindK)))
}

// pinningPinnedOnlyRateLimited is the PinnedOnlyRateLimited subtest of testPinning.
func pinningPinnedOnlyRateLimited(t *testing.T, f *Fixture) {
	// With an empty rate bucket a PinnedOnly claim reports a wait only
	// when a task pinned to its worker waits: unpinned ones are not its
	// business.
	rate := 1.0
	if _, err := f.Store.KindUpsert(f.Ctx(), store.KindUpsertParams{Name: kindK, Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	f.InsertNew(kindK, f.At(0))
	f.InsertNew(kindK, f.At(0))
	if n := len(f.Claim("w9", f.At(sec(1)), 1, kindK).Runs); n != 1 {
		t.Fatalf("first claim: %d runs, want the one token", n)
	}
	if res := f.claimPinned("w1", f.At(sec(1)), 10, kindK); len(res.Runs) != 0 || !res.RateLimitedUntil.IsZero() {
		t.Fatalf("PinnedOnly claim with only unpinned work: %d runs, RateLimitedUntil %v; want none, zero", len(res.Runs), res.RateLimitedUntil)
	}
	p := f.Params(kindK, f.At(sec(1)))
	p.WorkerIDs = []string{"w1"}
	pinned := f.Insert(p)
	res := f.claimPinned("w1", f.At(sec(1)), 10, kindK)
	if len(res.Runs) != 0 || res.RateLimitedUntil.IsZero() {
		t.Fatalf("PinnedOnly claim with pinned work on an empty bucket: %d runs, RateLimitedUntil %v; want none, set", len(res.Runs), res.RateLimitedUntil)
	}
	diff(t, "PinnedOnly claim once a token is due", []string{pinned.ID}, claimedIDs(f.claimPinned("w1", res.RateLimitedUntil, 10, kindK)))
}

// pinningLevelBeforePinning is the LevelBeforePinning subtest of testPinning.
func pinningLevelBeforePinning(t *testing.T, f *Fixture) {
	pinned := f.Params(kindK, f.At(0))
	pinned.WorkerIDs = []string{"w1"}
	pinned.Priority = rota.PriorityMid
	f.Insert(pinned)
	high := f.Params(kindK, f.At(sec(1)))
	high.Priority = rota.PriorityHigh
	f.Insert(high)
	if c := f.ClaimOne("w1", f.At(sec(2)), kindK); c.TaskID != high.ID {
		t.Fatalf("w1 claimed %s, want the high task %s (levels before pinning)", c.TaskID, high.ID)
	}
}

// pinningWidenedAfterClaim is the WidenedAfterClaim subtest of testPinning.
func pinningWidenedAfterClaim(t *testing.T, f *Fixture) {
	// Updating WorkerIDs to a set that still holds the running worker
	// does not stop its run; the empty set means any worker.
	p := f.Params(kindK, f.At(0))
	p.WorkerIDs = []string{"w1"}
	f.Insert(p)
	c := f.ClaimOne("w1", f.At(sec(1)), kindK)
	ws := []string{"w1", "w2"}
	_, err := f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, WorkerIDs: &ws, Now: f.At(sec(2))})
	must(t, "TaskUpdate", err)
	if hb := f.Heartbeat("w1", c.RunID, f.At(sec(3))); hb.Stop {
		t.Fatal("heartbeat: stop = true, but w1 is still allowed")
	}
	f.Fail("w1", c.RunID, f.At(sec(4)), nil)
	none := []string{}
	_, err = f.Store.TaskUpdate(f.Ctx(), store.TaskUpdateParams{ID: p.ID, WorkerIDs: &none, Now: f.At(sec(5))})
	must(t, "TaskUpdate", err)
	if len(f.Get(p.ID).WorkerIDs) != 0 {
		t.Fatalf("WorkerIDs after update to empty: %v", f.Get(p.ID).WorkerIDs)
	}
	f.ClaimOne("w9", f.At(sec(6)), kindK)
}

// claimPinned is Fixture.Claim with PinnedOnly set.
func (f *Fixture) claimPinned(worker string, now time.Time, n int, kinds ...string) store.TaskClaimResult {
	f.TB.Helper()
	res, err := f.Store.TaskClaim(f.Ctx(), store.TaskClaimParams{
		WorkerID: worker, WorkerAddress: Addr(worker), Kinds: kinds, Max: n, Now: now,
		NewRunID: f.NewRunID, PinnedOnly: true,
	})
	if err != nil {
		f.TB.Fatalf("TaskClaim(worker %s, kinds %v, max %d, PinnedOnly) at %s: %v", worker, kinds, n, f.rel(now), err)
	}
	if len(res.Runs) > n {
		f.TB.Fatalf("TaskClaim(worker %s, max %d, PinnedOnly) handed out %d runs", worker, n, len(res.Runs))
	}
	return res
}

// claimedIDs returns the task ids of a claim's runs, in order (nil for none).
func claimedIDs(res store.TaskClaimResult) []string {
	var ids []string
	for _, r := range res.Runs {
		ids = append(ids, r.TaskID)
	}
	return ids
}
