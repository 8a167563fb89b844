package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
)

type beatOutcome struct {
	res store.RunHeartbeatResult
	err error
}

// heldBeat claims a task of kind for worker w1 and starts a HeartbeatWait
// on its run; it returns the task id and the outcome channel once the
// heartbeat waits on the (fake) clock.
func (f *fixture) heldBeat(kind string, wait time.Duration) (string, <-chan beatOutcome) {
	f.t.Helper()
	task := f.submit(kind, f.clock.Now())
	res, err := f.d.Claim(context.Background(), ClaimRequest{WorkerID: "w1", Kinds: []string{kind}, Max: 1})
	if err != nil || len(res.Runs) != 1 {
		f.t.Fatalf("claim: %+v, %v", res, err)
	}
	before := f.clock.Timers()
	out := make(chan beatOutcome, 1)
	go func() {
		r, err := f.d.HeartbeatWait(context.Background(), res.Runs[0].RunID, "w1", "", wait)
		out <- beatOutcome{r, err}
	}()
	f.eventually("heartbeat held", func() bool { return f.clock.Timers() > before })
	return task.ID, out
}

func receiveBeat(t *testing.T, ch <-chan beatOutcome) beatOutcome {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("HeartbeatWait: %v", o.err)
		}
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("held heartbeat did not answer")
	}
	return beatOutcome{}
}

func noBeat(t *testing.T, ch <-chan beatOutcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("held heartbeat answered early: %+v", o)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestHeartbeatWaitAnswersAtOnceOnStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		trigger     func(f *fixture, taskID string) error
		stop, drain bool
	}{
		{"task stopped", func(f *fixture, id string) error {
			_, err := f.d.StopTask(context.Background(), id, "")
			return err
		}, true, false},
		{"worker stopped", func(f *fixture, _ string) error {
			_, err := f.d.StopWorker(context.Background(), "w1")
			return err
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			id, out := f.heldBeat("k", 10*time.Second)
			noBeat(t, out)
			if err := tc.trigger(f, id); err != nil {
				t.Fatal(err)
			}
			o := receiveBeat(t, out)
			if o.res.Stop != tc.stop || o.res.Drain != tc.drain {
				t.Errorf("stop %v drain %v, want %v %v", o.res.Stop, o.res.Drain, tc.stop, tc.drain)
			}
		})
	}
}

func TestHeartbeatWaitEndsAtAThirdOfTheLease(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	// Asked for 60 s; the task's heartbeat timeout is 30 s: held 10 s.
	_, out := f.heldBeat("k", 60*time.Second)
	f.clock.Advance(9 * time.Second)
	noBeat(t, out)
	f.clock.Advance(time.Second)
	o := receiveBeat(t, out)
	if o.res.Stop || o.res.Drain {
		t.Errorf("answer %+v, want neither stop nor drain", o.res)
	}
	// The lease was renewed when the heartbeat arrived, not when it answered.
	if want := f.clock.Now().Add(20 * time.Second); !o.res.LeaseExpiresAt.Equal(want) {
		t.Errorf("lease until %v, want %v", o.res.LeaseExpiresAt, want)
	}
}
