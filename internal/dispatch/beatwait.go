package dispatch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// beatWaiters are the heartbeats held open by HeartbeatWait, by run id, so
// that a stop of their task or of their worker answers them at once.
type beatWaiters struct {
	mu    sync.Mutex
	byRun map[string][]*beatWaiter
}

// beatWaiter is one held heartbeat.
type beatWaiter struct {
	runID, workerID string
	wake            chan struct{} // buffered 1
}

func (b *beatWaiters) add(runID, workerID string) *beatWaiter {
	w := &beatWaiter{runID: runID, workerID: workerID, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.byRun == nil {
		b.byRun = map[string][]*beatWaiter{}
	}
	b.byRun[runID] = append(b.byRun[runID], w)
	b.mu.Unlock()
	return w
}

func (b *beatWaiters) remove(w *beatWaiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := b.byRun[w.runID]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(b.byRun, w.runID)
	} else {
		b.byRun[w.runID] = ws
	}
}

// wakeUp wakes w (at most one wake-up is pending).
func (w *beatWaiter) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wakeRuns wakes the held heartbeats of the runs of t: a look-up per run,
// not a walk over every held heartbeat.
func (b *beatWaiters) wakeRuns(t *rota.Task) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range t.Runs {
		for _, w := range b.byRun[r.ID] {
			w.wakeUp()
		}
	}
}

// wakeWorker wakes the held heartbeats of a worker (a drain: rare, so a
// walk over the held heartbeats).
func (b *beatWaiters) wakeWorker(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ws := range b.byRun {
		for _, w := range ws {
			if w.workerID == id {
				w.wakeUp()
			}
		}
	}
}

// HeartbeatWait renews a run's lease as Heartbeat does, then, unless the
// answer already says stop or drain, holds it up to wait (at most a third
// of the run's heartbeat timeout, so that the lease it granted stays good)
// and answers as soon as the run's task or its worker is asked to stop
// through this dispatcher, with the flags read again. A stop made through
// another node is seen by the worker's next heartbeat. ctx ending or the
// dispatcher stopping end the wait early, with the first answer.
func (d *Dispatcher) HeartbeatWait(ctx context.Context, runID, workerID, message string, wait time.Duration) (store.RunHeartbeatResult, error) {
	// Registered before the heartbeat reads the flags: no lost wake-up.
	w := d.beats.add(runID, workerID)
	defer d.beats.remove(w)
	res, err := d.Heartbeat(ctx, runID, workerID, message)
	if err != nil || res.Stop || res.Drain {
		return res, err
	}
	if hb := time.Duration(res.HeartbeatTimeoutSeconds) * time.Second; hb > 0 {
		wait = min(wait, hb/3)
	}
	if wait <= 0 {
		return res, nil
	}
	t := d.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.wake:
	case <-t.C():
		return res, nil
	case <-ctx.Done():
		return res, nil
	case <-d.quit:
		return res, nil
	}
	// A stop was asked: read the flags again (this renews the lease too).
	again, err := d.Heartbeat(ctx, runID, workerID, "")
	if err != nil {
		return res, err
	}
	return again, nil
}
