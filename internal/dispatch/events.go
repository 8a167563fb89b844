package dispatch

import (
	"context"
	"time"

	"github.com/rotahq/rota"
)

// emit hands an event to the configured sink.
func (d *Dispatcher) emit(ev rota.Event) {
	if d.cfg.Events != nil {
		d.cfg.Events(ev)
	}
}

// emitSubmitted emits the event of t's submit (its state as submitted).
func (d *Dispatcher) emitSubmitted(t *rota.Task, now time.Time) {
	d.emit(rota.Event{Type: rota.EventTask, Kind: t.Kind, TaskID: t.ID, Status: t.Status, Time: now, RunAt: t.RunAt})
}

// emitTask emits t's state; a finished task's event carries its result.
func (d *Dispatcher) emitTask(t *rota.Task, now time.Time) {
	ev := rota.Event{Type: rota.EventTask, Kind: t.Kind, TaskID: t.ID, Status: t.Status, Attempt: t.Attempt,
		Message: t.Message, Time: now, RunAt: t.RunAt, ScheduleID: t.ScheduleID, FireTime: t.FireTime}
	if t.Status.Terminal() {
		ev.SetResult(t.Result)
	}
	d.emit(ev)
}

func (d *Dispatcher) emitClaimed(worker string, runs []rota.ClaimedRun) {
	if d.cfg.Events == nil {
		return
	}
	now := d.cfg.Clock.Now()
	for _, r := range runs {
		d.emit(rota.Event{Type: rota.EventRun, Kind: r.Kind, TaskID: r.TaskID, RunID: r.RunID, WorkerID: worker,
			Status: rota.StatusRunning, Attempt: r.Attempt, Time: now, RunAt: r.RunAt})
		d.emit(rota.Event{Type: rota.EventTask, Kind: r.Kind, TaskID: r.TaskID, Status: rota.StatusRunning,
			Attempt: r.Attempt, Time: now, RunAt: r.RunAt})
	}
}

// emitTaskByID reads a task and emits its state (after changes the store
// made without returning the task, e.g. lease expiries).
func (d *Dispatcher) emitTaskByID(ctx context.Context, id string) {
	if d.cfg.Events == nil || id == "" {
		return
	}
	t, err := d.cfg.Store.TaskGet(ctx, id)
	if err != nil {
		d.cfg.Logger.Warn("dispatch: read task for event", "task", id, "err", err)
		return
	}
	if n := len(t.Runs); n > 0 {
		// The run that just ended is the latest ended one.
		for i := n - 1; i >= 0; i-- {
			if r := t.Runs[i]; r.Status.Terminal() {
				d.emit(rota.Event{Type: rota.EventRun, Kind: t.Kind, TaskID: t.ID, RunID: r.ID, WorkerID: r.WorkerID,
					Status: r.Status, Attempt: r.Attempt, Message: r.Message, Time: r.EndTime})
				break
			}
		}
	}
	now := d.cfg.Clock.Now()
	d.emitTask(t, now)
	if t.Status.Terminal() && len(t.Dependents) > 0 {
		// An expiry that ended the task for good canceled its dependents.
		d.afterDeps(ctx, t, now)
	}
}
