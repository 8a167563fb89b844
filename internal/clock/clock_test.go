package clock

import (
	"testing"
	"time"
)

func TestFakeFiresTimersInOrder(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	a := f.NewTimer(2 * time.Second)
	b := f.NewTimer(time.Second)
	if got := f.Timers(); got != 2 {
		t.Fatalf("Timers() = %d, want 2", got)
	}
	f.Advance(1500 * time.Millisecond)
	select {
	case got := <-b.C():
		if !got.Equal(start.Add(1500 * time.Millisecond)) {
			t.Fatalf("b fired with %v", got)
		}
	default:
		t.Fatal("b did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a fired early")
	default:
	}
	if a.Stop() != true {
		t.Fatal("Stop of a pending timer reported false")
	}
	f.Advance(time.Hour)
	select {
	case <-a.C():
		t.Fatal("stopped timer fired")
	default:
	}
	a.Reset(0)
	select {
	case <-a.C():
	default:
		t.Fatal("Reset(0) did not fire at once")
	}
}

func TestRealNowIsUTC(t *testing.T) {
	t.Parallel()
	if loc := (Real{}).Now().Location(); loc != time.UTC {
		t.Fatalf("location %v, want UTC", loc)
	}
}
