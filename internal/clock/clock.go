// Package clock lets scheduling code take time as an input: production code
// uses Real, tests drive a Fake.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current instant in UTC.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that schedulers use.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset changes the timer to fire after d.
	Reset(d time.Duration)
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now in UTC (without the monotonic reading).
func (Real) Now() time.Time { return time.Now().UTC().Round(0) }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a clock that moves only when told. The zero value is not usable;
// call NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock set at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires the timers that came due, in
// order of their due time.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (which may be in the past: a backward jump) and
// fires the timers due at t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t.UTC()
	var due []*fakeTimer
	keep := f.timers[:0]
	for _, ft := range f.timers {
		if !ft.at.After(f.now) {
			due = append(due, ft)
		} else {
			keep = append(keep, ft)
		}
	}
	f.timers = keep
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	now := f.now
	f.mu.Unlock()
	for _, ft := range due {
		select {
		case ft.c <- now:
		default:
		}
	}
}

// Timers returns how many timers are waiting; tests use it to know a loop is
// asleep before they advance the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NewTimer returns a timer driven by Advance and Set.
func (f *Fake) NewTimer(d time.Duration) Timer {
	ft := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	ft.Reset(d)
	return ft
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time
	at time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, ft := range t.f.timers {
		if ft == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.Stop()
	t.f.mu.Lock()
	t.at = t.f.now.Add(d)
	if d <= 0 {
		t.f.mu.Unlock()
		select {
		case t.c <- t.at:
		default:
		}
		return
	}
	t.f.timers = append(t.f.timers, t)
	t.f.mu.Unlock()
}
