package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// testAccess covers the API tokens and the audit log (AccessStore).
func testAccess(t *testing.T, ns newStoreFunc) {
	parallel(t, ns, "TokenRoundTrip", accessTokenRoundTrip)

	parallel(t, ns, "TokenConflicts", accessTokenConflicts)

	parallel(t, ns, "TokenRevoke", accessTokenRevoke)

	parallel(t, ns, "AuditLog", testAuditLog)

	parallel(t, ns, "RunKinds", accessRunKinds)
}

// accessTokenRoundTrip stores tokens and reads them back by hash and in the list.
func accessTokenRoundTrip(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	tok := rota.Token{ID: f.NewTaskID(f.Base), Name: "ci", Role: rota.RoleSubmitter, Kinds: []string{"a", "b"},
		Hash: "aa11", CreatedAt: f.At(time.Second)}
	if err := f.Store.TokenInsert(ctx, tok); err != nil {
		t.Fatalf("TokenInsert: %v", err)
	}
	got, err := f.Store.TokenGetByHash(ctx, "aa11")
	if err != nil {
		t.Fatalf("TokenGetByHash: %v", err)
	}
	if diff := cmp.Diff(tok, *got); diff != "" {
		t.Fatalf("token (-want +got):\n%s", diff)
	}
	if _, err := f.Store.TokenGetByHash(ctx, "bb22"); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("TokenGetByHash(unknown) = %v, want ErrNotFound", err)
	}
	// Any-kind tokens read back with nil Kinds.
	admin := rota.Token{ID: f.NewTaskID(f.At(time.Second)), Name: "root", Role: rota.RoleAdmin, Hash: "cc33", CreatedAt: f.At(2 * time.Second)}
	if err := f.Store.TokenInsert(ctx, admin); err != nil {
		t.Fatalf("TokenInsert(admin): %v", err)
	}
	list, err := f.Store.TokenList(ctx)
	if err != nil {
		t.Fatalf("TokenList: %v", err)
	}
	if diff := cmp.Diff([]rota.Token{tok, admin}, list); diff != "" {
		t.Fatalf("TokenList (-want +got):\n%s", diff)
	}
}

// accessTokenConflicts refuses a second live token of a name or of a hash.
func accessTokenConflicts(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	tok := rota.Token{ID: f.NewTaskID(f.Base), Name: "ci", Role: rota.RoleReader, Hash: "aa11", CreatedAt: f.Base}
	if err := f.Store.TokenInsert(ctx, tok); err != nil {
		t.Fatalf("TokenInsert: %v", err)
	}
	sameName := rota.Token{ID: f.NewTaskID(f.At(time.Second)), Name: "ci", Role: rota.RoleReader, Hash: "bb22", CreatedAt: f.Base}
	if err := f.Store.TokenInsert(ctx, sameName); !errors.Is(err, rota.ErrConflict) {
		t.Fatalf("TokenInsert(same name) = %v, want ErrConflict", err)
	}
	sameHash := rota.Token{ID: f.NewTaskID(f.At(2 * time.Second)), Name: "other", Role: rota.RoleReader, Hash: "aa11", CreatedAt: f.Base}
	if err := f.Store.TokenInsert(ctx, sameHash); !errors.Is(err, rota.ErrConflict) {
		t.Fatalf("TokenInsert(same hash) = %v, want ErrConflict", err)
	}
	// Once revoked, the name is free again.
	if _, err := f.Store.TokenRevoke(ctx, store.TokenRevokeParams{ID: tok.ID, Now: f.At(time.Minute)}); err != nil {
		t.Fatalf("TokenRevoke: %v", err)
	}
	if err := f.Store.TokenInsert(ctx, sameName); err != nil {
		t.Fatalf("TokenInsert(name of a revoked token): %v", err)
	}
}

// accessTokenRevoke revokes a token once; revoking again keeps the first time.
func accessTokenRevoke(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	tok := rota.Token{ID: f.NewTaskID(f.Base), Name: "w", Role: rota.RoleWorker, Hash: "aa11", CreatedAt: f.Base}
	if err := f.Store.TokenInsert(ctx, tok); err != nil {
		t.Fatalf("TokenInsert: %v", err)
	}
	got, err := f.Store.TokenRevoke(ctx, store.TokenRevokeParams{ID: tok.ID, Now: f.At(time.Minute)})
	if err != nil {
		t.Fatalf("TokenRevoke: %v", err)
	}
	if !got.RevokedAt.Equal(f.At(time.Minute)) {
		t.Fatalf("RevokedAt = %v, want %v", got.RevokedAt, f.At(time.Minute))
	}
	// Again: nothing changes.
	again, err := f.Store.TokenRevoke(ctx, store.TokenRevokeParams{ID: tok.ID, Now: f.At(time.Hour)})
	if err != nil || !again.RevokedAt.Equal(f.At(time.Minute)) {
		t.Fatalf("second TokenRevoke = %+v, %v; want RevokedAt kept", again, err)
	}
	byHash, err := f.Store.TokenGetByHash(ctx, "aa11")
	if err != nil || byHash.RevokedAt.IsZero() {
		t.Fatalf("TokenGetByHash after revoke = %+v, %v; want it revoked", byHash, err)
	}
	if _, err := f.Store.TokenRevoke(ctx, store.TokenRevokeParams{ID: "nope", Now: f.Base}); !errors.Is(err, rota.ErrNotFound) {
		t.Fatalf("TokenRevoke(unknown) = %v, want ErrNotFound", err)
	}
}

// accessRunKinds reads the kinds of runs, skipping unknown ids.
func accessRunKinds(t *testing.T, f *Fixture) {
	f.InsertNew("a", f.Base)
	f.InsertNew("b", f.Base)
	ra := f.ClaimOne("w", f.At(time.Second), "a")
	rb := f.ClaimOne("w", f.At(time.Second), "b")
	got, err := f.Store.RunKinds(f.Ctx(), []string{ra.RunID, rb.RunID, "ffffffffffffffffffffffffffffffff"})
	if err != nil {
		t.Fatalf("RunKinds: %v", err)
	}
	if diff := cmp.Diff(map[string]string{ra.RunID: "a", rb.RunID: "b"}, got); diff != "" {
		t.Fatalf("RunKinds (-want +got):\n%s", diff)
	}
}

// testAuditLog appends records and lists them with each filter, pages them
// and cleans the old ones.
func testAuditLog(t *testing.T, f *Fixture) {
	ctx := f.Ctx()
	var recs []rota.AuditRecord
	for i, a := range []struct{ actor, action, target string }{
		{"alice", "task.stop", "t1"},
		{"bob", "kind.put", "email"},
		{"alice", "kind.put", "email"},
		{"anonymous", "schedule.delete", "s1"},
	} {
		at := f.At(time.Duration(i) * time.Hour)
		r := rota.AuditRecord{ID: f.NewTaskID(at), At: at, Actor: a.actor, Role: rota.RoleOperator, Action: a.action,
			Target: a.target, RequestID: "req", RemoteAddr: "127.0.0.1:1"}
		if a.action == "kind.put" {
			r.Before, r.After = json.RawMessage(`{"paused":false}`), json.RawMessage(`{"paused":true}`)
		}
		if err := f.Store.AuditAppend(ctx, r); err != nil {
			t.Fatalf("AuditAppend: %v", err)
		}
		recs = append(recs, r)
	}
	list := func(p store.AuditListParams) store.AuditListResult {
		t.Helper()
		res, err := f.Store.AuditList(ctx, p)
		if err != nil {
			t.Fatalf("AuditList(%+v): %v", p, err)
		}
		return res
	}
	ids := func(rs []rota.AuditRecord) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all := list(store.AuditListParams{Limit: 10})
	if diff := cmp.Diff([]rota.AuditRecord{recs[3], recs[2], recs[1], recs[0]}, all.Records); diff != "" {
		t.Fatalf("AuditList, newest first (-want +got):\n%s", diff)
	}
	if all.NextCursor != "" {
		t.Fatalf("NextCursor %q on the only page", all.NextCursor)
	}
	cases := []struct {
		name string
		p    store.AuditListParams
		want []string
	}{
		{"actor", store.AuditListParams{Actor: "alice", Limit: 10}, ids([]rota.AuditRecord{recs[2], recs[0]})},
		{"action", store.AuditListParams{Action: "kind.put", Limit: 10}, ids([]rota.AuditRecord{recs[2], recs[1]})},
		{"target", store.AuditListParams{Target: "s1", Limit: 10}, ids(recs[3:4])},
		{"since", store.AuditListParams{Since: f.At(2 * time.Hour), Limit: 10}, ids([]rota.AuditRecord{recs[3], recs[2]})},
		{"cursor", store.AuditListParams{Cursor: recs[2].ID, Limit: 10}, ids([]rota.AuditRecord{recs[1], recs[0]})},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, ids(list(c.p).Records)); diff != "" {
			t.Errorf("AuditList by %s (-want +got):\n%s", c.name, diff)
		}
	}
	// Pages of 3 then 1.
	p1 := list(store.AuditListParams{Limit: 3})
	p2 := list(store.AuditListParams{Limit: 3, Cursor: p1.NextCursor})
	if got := append(ids(p1.Records), ids(p2.Records)...); len(p1.Records) != 3 || p2.NextCursor != "" ||
		!cmp.Equal(got, ids(all.Records)) {
		t.Fatalf("pages %v + %v (next %q), want %v", ids(p1.Records), ids(p2.Records), p2.NextCursor, ids(all.Records))
	}
	// Cleanup deletes what is older than the cut, in batches.
	n, err := f.Store.AuditCleanup(ctx, f.At(2*time.Hour), 1)
	if err != nil || n != 1 {
		t.Fatalf("AuditCleanup(limit 1) = %d, %v; want 1", n, err)
	}
	n, err = f.Store.AuditCleanup(ctx, f.At(2*time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("AuditCleanup = %d, %v; want 1", n, err)
	}
	if diff := cmp.Diff(ids([]rota.AuditRecord{recs[3], recs[2]}), ids(list(store.AuditListParams{Limit: 10}).Records)); diff != "" {
		t.Fatalf("after cleanup (-want +got):\n%s", diff)
	}
}
