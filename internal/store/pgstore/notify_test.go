package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// waitFor returns the first notification of kind on ch within d.
func waitFor(ch <-chan store.Notification, kind string, d time.Duration) (store.Notification, bool) {
	timeout := time.After(d)
	for {
		select {
		case n := <-ch:
			if n.Kind == kind {
				return n, true
			}
		case <-timeout:
			return store.Notification{}, false
		}
	}
}

// warmUp inserts tasks of kind "warmup" through f until notes hears of
// one (Subscribe gives no signal once it listens), then drops whatever the
// warm-up left queued.
func warmUp(t *testing.T, f *storetest.Fixture, notes <-chan store.Notification) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.InsertNew("warmup", f.At(0))
		if _, ok := waitFor(notes, "warmup", 200*time.Millisecond); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification for tasks inserted by another store within 10s")
		}
	}
	for {
		select {
		case <-notes:
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

func TestSubscribeHearsOtherNode(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	other := openSchema(t, newSchema(t), "node-c") // another schema: must not cross-talk
	if !a.SupportsNotify() {
		t.Fatal("SupportsNotify = false")
	}
	notes := storetest.Subscribe(t, a)
	fb := storetest.NewFixture(t, b)
	warmUp(t, fb, notes)

	fo := storetest.NewFixture(t, other)
	fo.InsertNew("isolated", fo.At(0))

	// A task due now: RunAt zero. A delayed one: its RunAt, so that the
	// receiver can set a timer.
	start := time.Now()
	fb.InsertNew("now", fb.At(0))
	n, ok := waitFor(notes, "now", time.Second)
	if !ok {
		t.Fatal("no notification within 1s of an insert by another store")
	}
	t.Logf("notification latency %v", time.Since(start))
	if !n.RunAt.IsZero() {
		t.Fatalf("notification of a due task has RunAt %v, want zero (now)", n.RunAt)
	}
	p := fb.Params("later", fb.At(0))
	p.RunAt = fb.At(90*time.Second + 250*time.Millisecond)
	fb.Insert(p)
	n, ok = waitFor(notes, "later", time.Second)
	if !ok {
		t.Fatal("no notification within 1s of a delayed insert")
	}
	if !n.RunAt.Equal(p.RunAt) {
		t.Fatalf("notification RunAt = %v, want %v", n.RunAt, p.RunAt)
	}
	// The other schema's insert was sent before the last two: had it
	// crossed over, it would have been delivered by now.
	for {
		select {
		case n := <-notes:
			if n.Kind == "isolated" {
				t.Fatal("heard a notification of another schema")
			}
			continue
		default:
		}
		break
	}
}

func TestSubscribeEvents(t *testing.T) {
	// Retries, lease expiries, resumed kinds, updates and requeued stopped
	// runs are heard as well as inserts.
	t.Parallel()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	notes := storetest.Subscribe(t, a)
	f := storetest.NewFixture(t, b)
	warmUp(t, f, notes)
	expect := func(what, kind string, runAt time.Time) {
		t.Helper()
		n, ok := waitFor(notes, kind, time.Second)
		if !ok {
			t.Fatalf("%s: no notification for kind %s", what, kind)
		}
		if !n.RunAt.Equal(runAt) {
			t.Fatalf("%s: RunAt %v, want %v", what, n.RunAt, runAt)
		}
	}

	f.InsertNew("retry", f.At(0))
	expect("insert", "retry", time.Time{})
	c := f.ClaimOne("w1", f.At(time.Second), "retry")
	f.Fail("w1", c.RunID, f.At(2*time.Second), func(n int) time.Duration { return 5 * time.Second })
	expect("retry after backoff", "retry", f.At(7*time.Second))

	f.InsertNew("lapse", f.At(0))
	expect("insert", "lapse", time.Time{})
	f.ClaimOne("w1", f.At(time.Second), "lapse")
	if res := f.Expire(f.At(time.Hour)); res.Expired == 0 {
		t.Fatal("nothing expired")
	}
	expect("lease expiry", "lapse", time.Time{})

	paused, resumed := true, false
	if _, err := b.KindUpsert(t.Context(), store.KindUpsertParams{Name: "resume", Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.KindUpsert(t.Context(), store.KindUpsertParams{Name: "resume", Paused: &resumed}); err != nil {
		t.Fatal(err)
	}
	expect("resume", "resume", time.Time{})

	p := f.Params("pin", f.At(0))
	p.WorkerIDs = []string{"w1", "w2"}
	f.Insert(p)
	expect("insert", "pin", time.Time{})
	c = f.ClaimOne("w1", f.At(time.Second), "pin")
	if _, err := b.TaskUpdate(t.Context(), store.TaskUpdateParams{ID: p.ID, WorkerIDs: &[]string{"w2"}, Now: f.At(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	f.Succeed("w1", c.RunID, f.At(3*time.Second)) // stopped: ends CANCELED, task requeued
	expect("stopped run requeued", "pin", time.Time{})

	// An update of a waiting task: it may now suit other workers.
	p = f.Params("upd", f.At(0))
	p.WorkerIDs = []string{"w9"}
	f.Insert(p)
	expect("insert", "upd", time.Time{})
	if _, err := b.TaskUpdate(t.Context(), store.TaskUpdateParams{ID: p.ID, WorkerIDs: &[]string{}, Now: f.At(time.Second)}); err != nil {
		t.Fatal(err)
	}
	expect("update", "upd", time.Time{})

	f.InsertNew("release", f.At(0))
	expect("insert", "release", time.Time{})
	c = f.ClaimOne("w1", f.At(time.Second), "release")
	f.Complete(store.RunCompleteParams{RunID: c.RunID, WorkerID: "w1", Release: true, Now: f.At(2 * time.Second)})
	expect("released run", "release", time.Time{})
}

func TestSubscribeReconnects(t *testing.T) {
	// The listening connection is killed: Subscribe reconnects, announces
	// every kind (notifications may have been missed), and hears again.
	t.Parallel()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	notes := storetest.Subscribe(t, a)
	f := storetest.NewFixture(t, b)
	warmUp(t, f, notes) // drained: "warmup" below can only come from the announcement
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'`, schema).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listening connections, want 1", killed)
	}
	if _, ok := waitFor(notes, "warmup", 5*time.Second); !ok {
		t.Fatal("no notification announcing the known kinds after the reconnection")
	}
	f.InsertNew("after", f.At(0))
	if _, ok := waitFor(notes, "after", 5*time.Second); !ok {
		t.Fatal("no notification after the reconnection")
	}
}

// TestSubscribeSkipsOwnEcho checks that a node does not hear its own
// inserts (its dispatcher woke its waiters already) but hears the other
// nodes' and its own retries (a change its dispatcher cannot know of in
// general: see txn.notifySelf).
func TestSubscribeSkipsOwnEcho(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	notes := storetest.Subscribe(t, a)
	fb := storetest.NewFixture(t, b)
	warmUp(t, fb, notes)
	fa := storetest.NewFixture(t, a)

	fa.InsertNew("own", fa.At(0))
	fb.InsertNew("theirs", fb.At(0)) // sent after a's insert: heard after it
	if _, ok := waitFor(notes, "theirs", 2*time.Second); !ok {
		t.Fatal("no notification of the other node's insert")
	}
	for {
		select {
		case n := <-notes:
			if n.Kind == "own" {
				t.Fatal("node-a heard its own insert")
			}
			continue
		default:
		}
		break
	}
	c := fa.ClaimOne("w1", fa.At(time.Second), "own")
	fa.Fail("w1", c.RunID, fa.At(2*time.Second), func(int) time.Duration { return 5 * time.Second })
	n, ok := waitFor(notes, "own", 2*time.Second)
	if !ok {
		t.Fatal("node-a did not hear its own retry")
	}
	if !n.RunAt.Equal(fa.At(7 * time.Second)) {
		t.Fatalf("retry notification RunAt %v, want %v", n.RunAt, fa.At(7*time.Second))
	}
}

// TestNotifyOnlyWhenPeersListen watches the schema's channel from a plain
// connection (not a node: it announces nothing). A node listening alone
// sends only the notes it must hear itself; once another node listens,
// the two learn of each other (hello, here), the newcomer wakes its
// receivers for every kind (a task announced to nobody meanwhile is
// found), and inserts are announced again.
func TestNotifyOnlyWhenPeersListen(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a := openSchema(t, schema, "node-a")
	b := openSchema(t, schema, "node-b")
	watch, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	if _, err := watch.Exec(t.Context(), "LISTEN "+pgx.Identifier{pgstore.ChannelName(schema)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// next returns the next payload on the channel, "" after d of silence.
	next := func(d time.Duration) string {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		n, err := watch.WaitForNotification(ctx)
		if err != nil {
			return ""
		}
		return n.Payload
	}
	// until reads payloads until want, failing on any payload of refused.
	until := func(want string, refused func(string) bool) {
		t.Helper()
		for {
			p := next(5 * time.Second)
			switch {
			case p == "":
				t.Fatalf("no payload %q within 5 s", want)
			case refused != nil && refused(p):
				t.Fatalf("payload %q sent, not wanted here", p)
			case p == want:
				return
			}
		}
	}

	storetest.Subscribe(t, a)
	until("|hello|node-a", nil) // a listens, and knows no other node
	fa := storetest.NewFixture(t, a)
	fa.InsertNew("alone", fa.At(0))
	// A retry is a note a must hear itself (anonymous): sent after the
	// insert's, had a sent that.
	c := fa.ClaimOne("w1", fa.At(time.Second), "alone")
	fa.Fail("w1", c.RunID, fa.At(2*time.Second), func(int) time.Duration { return 5 * time.Second })
	retry := fmt.Sprintf("alone|%d|", fa.At(7*time.Second).UnixMilli())
	until(retry, func(p string) bool { return strings.HasPrefix(p, "alone|0|") })

	fa.InsertNew("unheard", fa.At(0)) // announced to nobody: no node but a listens
	notesB := storetest.Subscribe(t, b)
	until("|hello|node-b", func(p string) bool { return strings.HasPrefix(p, "unheard|") })
	until("|here|node-a", nil) // a's answer
	// b learned of a: it wakes its receivers for every kind.
	if _, ok := waitFor(notesB, "unheard", 5*time.Second); !ok {
		t.Fatal("node-b did not look again at the kinds on learning of node-a")
	}
	// a learned of b: inserts are announced again.
	fa.InsertNew("heard", fa.At(0))
	if _, ok := waitFor(notesB, "heard", 5*time.Second); !ok {
		t.Fatal("node-b did not hear node-a's insert")
	}
}
