package storetest

import (
	"fmt"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// kindSettings is a Kind without Rate, which the suite does not test yet.
type kindSettings struct {
	Name             string
	PriorityFactor   int
	Paused           bool
	MaxRunning       int
	RetentionSeconds int
}

func settingsOf(k rota.Kind) kindSettings {
	return kindSettings{k.Name, k.PriorityFactor, k.Paused, k.MaxRunning, k.RetentionSeconds}
}

// upsertKind applies p; it fails the test on error.
func (f *Fixture) upsertKind(p store.KindUpsertParams) *rota.Kind {
	f.TB.Helper()
	k, err := f.Store.KindUpsert(f.Ctx(), p)
	must(f.TB, "KindUpsert("+p.Name+")", err)
	return k
}

// getKind returns a kind; it fails the test on error.
func (f *Fixture) getKind(name string) *rota.Kind {
	f.TB.Helper()
	k, err := f.Store.KindGet(f.Ctx(), name)
	must(f.TB, "KindGet("+name+")", err)
	return k
}

func ptr[T any](v T) *T { return &v }

func testKind(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "CreatedByInsert", kindCreatedByInsert)

	parallel(t, ns, "UpsertNewDefaults", kindUpsertNewDefaults)

	parallel(t, ns, "UpsertPartial", kindUpsertPartial)

	parallel(t, ns, "List", kindList)

	parallel(t, ns, "GetUnknown", kindGetUnknown)

	parallel(t, ns, "Paused", kindPaused)

	parallel(t, ns, "MaxRunning", kindMaxRunning)

	parallel(t, ns, "MaxRunningCountsRuns", kindMaxRunningCountsRuns)
}

// kindCreatedByInsert is the CreatedByInsert subtest of testKind.
func kindCreatedByInsert(t *testing.T, f *Fixture) {
	f.InsertNew("fresh", f.At(0))
	diff(t, "kind made by an insert", kindSettings{Name: "fresh", PriorityFactor: rota.DefaultPriorityFactor}, settingsOf(*f.getKind("fresh")))
}

// kindUpsertNewDefaults is the UpsertNewDefaults subtest of testKind.
func kindUpsertNewDefaults(t *testing.T, f *Fixture) {
	k := f.upsertKind(store.KindUpsertParams{Name: "x"})
	want := kindSettings{Name: "x", PriorityFactor: rota.DefaultPriorityFactor}
	diff(t, "KindUpsert result", want, settingsOf(*k))
	diff(t, "KindGet", want, settingsOf(*f.getKind("x")))
}

// kindUpsertPartial is the UpsertPartial subtest of testKind.
func kindUpsertPartial(t *testing.T, f *Fixture) {
	f.InsertNew("x", f.At(0))
	steps := []struct {
		p    store.KindUpsertParams
		want kindSettings
	}{
		{store.KindUpsertParams{Name: "x", Paused: ptr(true)}, kindSettings{"x", 2, true, 0, 0}},
		{store.KindUpsertParams{Name: "x", PriorityFactor: ptr(3)}, kindSettings{"x", 3, true, 0, 0}},
		{store.KindUpsertParams{Name: "x", MaxRunning: ptr(5), RetentionSeconds: ptr(3600)}, kindSettings{"x", 3, true, 5, 3600}},
		{store.KindUpsertParams{Name: "x", Paused: ptr(false)}, kindSettings{"x", 3, false, 5, 3600}},
		{store.KindUpsertParams{Name: "x", MaxRunning: ptr(0)}, kindSettings{"x", 3, false, 0, 3600}},
		{store.KindUpsertParams{Name: "x"}, kindSettings{"x", 3, false, 0, 3600}},
	}
	for i, s := range steps {
		diff(t, fmt.Sprintf("KindUpsert result of step %d", i+1), s.want, settingsOf(*f.upsertKind(s.p)))
		diff(t, fmt.Sprintf("KindGet after step %d", i+1), s.want, settingsOf(*f.getKind("x")))
	}
	// A new kind created with some fields set gets defaults for the rest.
	diff(t, "new kind with a field", kindSettings{"y", 2, true, 0, 0}, settingsOf(*f.upsertKind(store.KindUpsertParams{Name: "y", Paused: ptr(true)})))
}

// kindList is the List subtest of testKind.
func kindList(t *testing.T, f *Fixture) {
	f.InsertNew("b", f.At(0))
	f.upsertKind(store.KindUpsertParams{Name: "c", Paused: ptr(true)})
	f.InsertNew("a", f.At(sec(1)))
	f.InsertNew("b", f.At(sec(2)))
	kinds, err := f.Store.KindList(f.Ctx())
	must(t, "KindList", err)
	var got []kindSettings
	for _, k := range kinds {
		got = append(got, settingsOf(k))
	}
	diff(t, "KindList", []kindSettings{{"a", 2, false, 0, 0}, {"b", 2, false, 0, 0}, {"c", 2, true, 0, 0}}, got)
}

// kindGetUnknown is the GetUnknown subtest of testKind.
func kindGetUnknown(t *testing.T, f *Fixture) {
	f.InsertNew("a", f.At(0))
	_, err := f.Store.KindGet(f.Ctx(), "nope")
	wantErr(t, "KindGet(unknown)", err, rota.ErrNotFound)
}

// kindPaused is the Paused subtest of testKind.
func kindPaused(t *testing.T, f *Fixture) {
	f.InsertNew("a", f.At(0))
	f.upsertKind(store.KindUpsertParams{Name: "a", Paused: ptr(true)})
	f.InsertNew("a", f.At(sec(1))) // a paused kind accepts tasks
	other := f.InsertNew("b", f.At(sec(1)))
	f.ClaimNone("w1", f.At(sec(2)), "a")
	res := f.Claim("w1", f.At(sec(2)), 10, "a", "b")
	if len(res.Runs) != 1 || res.Runs[0].TaskID != other.ID {
		t.Fatalf("claim of [a b] with a paused: %+v, want b's task only", res.Runs)
	}
	f.upsertKind(store.KindUpsertParams{Name: "a", Paused: ptr(false)})
	if n := len(f.Claim("w1", f.At(sec(3)), 10, "a").Runs); n != 2 {
		t.Fatalf("claim after resume: %d runs, want 2", n)
	}
}

// kindMaxRunning is the MaxRunning subtest of testKind.
func kindMaxRunning(t *testing.T, f *Fixture) {
	for i := range 5 {
		f.InsertNew(kindK, f.At(sec(i)))
	}
	f.upsertKind(store.KindUpsertParams{Name: kindK, MaxRunning: ptr(2)})
	res := f.Claim("w1", f.At(sec(10)), 5, kindK)
	if len(res.Runs) != 2 {
		t.Fatalf("claim max 5 under MaxRunning 2: %d runs, want 2", len(res.Runs))
	}
	f.ClaimNone("w2", f.At(sec(10)), kindK)
	f.Succeed("w1", res.Runs[0].RunID, f.At(sec(11)))
	f.ClaimOne("w2", f.At(sec(12)), kindK)
	f.ClaimNone("w3", f.At(sec(12)), kindK)
	// A run that lapsed frees its slot too.
	f.Expire(f.At(sec(45)))
	if n := len(f.Claim("w3", f.At(sec(45)), 5, kindK).Runs); n != 2 {
		t.Fatalf("claim after both runs lapsed: %d runs, want 2", n)
	}
	// Lifting the cap hands out the rest.
	f.upsertKind(store.KindUpsertParams{Name: kindK, MaxRunning: ptr(0)})
	if n := len(f.Claim("w4", f.At(sec(46)), 5, kindK).Runs); n != 2 {
		t.Fatalf("claim without a cap: %d runs, want the 2 left", n)
	}
}

// kindMaxRunningCountsRuns is the MaxRunningCountsRuns subtest of testKind.
func kindMaxRunningCountsRuns(t *testing.T, f *Fixture) {
	// The cap counts runs, so a multi-worker task fills it too.
	p := f.Params(kindK, f.At(0))
	p.Workers = 3
	f.Insert(p)
	f.upsertKind(store.KindUpsertParams{Name: kindK, MaxRunning: ptr(2)})
	f.ClaimOne("w1", f.At(sec(1)), kindK)
	f.ClaimOne("w2", f.At(sec(1)), kindK)
	f.ClaimNone("w3", f.At(sec(1)), kindK)
}
