package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
	"github.com/rotahq/rota/internal/tcpproxy"
)

// TestConnectionLossIsUnavailable cuts the store's way to PostgreSQL:
// reads, writes and pings answer rota.ErrUnavailable (HTTP 503), and once
// the database is reachable again the same store works, with nothing
// acknowledged lost.
func TestConnectionLossIsUnavailable(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	proxy := tcpproxy.Start(t, "127.0.0.1:0", target)
	addr := proxy.Addr()
	u.Host = addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, err := pgstore.New(ctx, pgstore.Config{URL: u.String(), Schema: newSchema(t), NodeID: "loss"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := storetest.NewFixture(t, st)
	acked := f.InsertNew("k", f.At(0))

	proxy.Cut()
	ops := map[string]func() error{
		"TaskInsert": func() error { _, err := st.TaskInsert(f.Ctx(), f.Params("k", f.At(time.Second))); return err },
		"TaskGet":    func() error { _, err := st.TaskGet(f.Ctx(), acked.ID); return err },
		"Ping":       func() error { return st.Ping(f.Ctx()) },
		"PingWrite":  func() error { return st.PingWrite(f.Ctx(), f.At(time.Second)) },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, rota.ErrUnavailable) {
			t.Fatalf("%s with the database cut off: err = %v (code %s), want unavailable", name, err, rota.ErrorCode(err))
		}
	}

	tcpproxy.Start(t, addr, target) // the database is back, same address
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := st.PingWrite(f.Ctx(), f.At(2*time.Second))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PingWrite after the database came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, op := range ops {
		if err := op(); err != nil {
			t.Fatalf("%s after the database came back: %v", name, err)
		}
	}
	if got := f.Get(acked.ID); got.ID != acked.ID {
		t.Fatalf("acknowledged task %s lost", acked.ID)
	}
}
