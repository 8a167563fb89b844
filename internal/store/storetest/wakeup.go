package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
)

// WakeUp measures the cross-node wake-up of a store: node b inserts n
// tasks of kind due now, one at a time, and node a (a store of its own on
// the same database) hears each through Subscribe. It fails the test when
// a wake-up does not come within 2 s, and returns the p50 and p99 from the
// insert call to the notification on a. The figures are a benchmark's:
// callers log them (a timed bound would fail under a loaded CI).
func WakeUp(t testing.TB, a, b store.Store, kind string, n int) (p50, p99 time.Duration) {
	t.Helper()
	heard := make(chan time.Time, n)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Subscribe(ctx, func(note store.Notification) {
			if note.Kind == kind {
				select {
				case heard <- time.Now():
				default:
				}
			}
		})
	}()
	defer func() { cancel(); <-done }()
	fb := NewFixture(t, b)
	// The subscription is set up when a first insert is heard: Subscribe
	// says nothing when it listens, and a fixed pause before the first
	// insert lost its notification on a loaded machine (TestCrossNodeWakeUp
	// failed at insert 0). Insert until one is heard, one insert every 2 s
	// (the bound of each insert below), for up to 30 s.
	for ready, deadline := false, time.Now().Add(30*time.Second); !ready; {
		fb.InsertNew(kind, fb.At(0))
		select {
		case <-heard:
			ready = true
		case <-time.After(2 * time.Second):
			if time.Now().After(deadline) {
				t.Fatalf("no wake-up on the other node within 30 s of subscribing")
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // late wake-ups of earlier warm-up inserts
	for len(heard) > 0 {
		<-heard
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		fb.InsertNew(kind, fb.At(time.Duration(i)*time.Millisecond))
		select {
		case at := <-heard:
			lat = append(lat, at.Sub(start))
		case <-time.After(2 * time.Second):
			t.Fatalf("insert %d: no wake-up on the other node within 2 s", i)
		}
		// Drain a duplicate notification of the same insert, if any.
		for len(heard) > 0 {
			<-heard
		}
		time.Sleep(time.Duration(i%7) * time.Millisecond) // spread over any poll interval
	}
	slices.Sort(lat)
	return lat[n/2], lat[n*99/100]
}
