package redisstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// taskDoc is a task's record: the task, its bookkeeping and its current
// run(s).
type taskDoc struct {
	ID         string          `json:"id"`
	Kind       string          `json:"k"`
	Level      int             `json:"l"`
	Payload    json.RawMessage `json:"p,omitempty"`
	Key        string          `json:"key,omitempty"`
	Status     rota.Status     `json:"s"`
	Done       bool            `json:"done,omitempty"`
	Avail      bool            `json:"av,omitempty"`
	Held       bool            `json:"held,omitempty"`
	Attempt    int             `json:"a,omitempty"`
	Failures   int             `json:"f,omitempty"`
	Successes  int             `json:"ok,omitempty"`
	Running    int             `json:"run,omitempty"`
	MaxRetries int             `json:"mr"`
	Workers    int             `json:"w"`
	WorkerIDs  []string        `json:"wids,omitempty"`
	TimeoutS   int             `json:"to,omitempty"`
	HBS        int             `json:"hb"`
	Stop       bool            `json:"stop,omitempty"`
	Created    int64           `json:"c"`
	RunAt      int64           `json:"at"`
	Start      int64           `json:"st,omitempty"`
	End        int64           `json:"end,omitempty"`
	Addr       string          `json:"addr,omitempty"`
	Msg        string          `json:"msg,omitempty"`
	Result     json.RawMessage `json:"res,omitempty"`
	Sched      string          `json:"sc,omitempty"`
	Fire       int64           `json:"fire,omitempty"`
	SAttempt   int             `json:"sa,omitempty"`
	Skip       string          `json:"skip,omitempty"`
	Triggered  bool            `json:"trig,omitempty"`
	Waiting    int             `json:"dw,omitempty"` // dependencies not yet succeeded
	Parents    []string        `json:"dep,omitempty"`
	Children   int             `json:"ch,omitempty"`   // tasks that depend on it (ch:<id>)
	Hist       int             `json:"hist,omitempty"` // runs in the history list (h:<id>)
	Ran        []string        `json:"ran,omitempty"`  // the workers that ran it (wt:<worker> index)
	Runs       []runDoc        `json:"runs,omitempty"` // the current run(s), oldest first
}

// runDoc is a run in its task's record (or history list).
type runDoc struct {
	ID       string      `json:"id"`
	Worker   string      `json:"w"`
	Addr     string      `json:"addr,omitempty"`
	Attempt  int         `json:"a"`
	Status   rota.Status `json:"s"`
	Start    int64       `json:"st"`
	End      int64       `json:"end,omitempty"`
	Lease    int64       `json:"lease,omitempty"`
	Deadline int64       `json:"dl,omitempty"`
	Stop     bool        `json:"stop,omitempty"`
	Msg      string      `json:"msg,omitempty"`
}

// kRunTasks is the hash run id → task id: a report finds its task's
// record through it (run ids are opaque, made by the caller's NewRunID).
func (s *Store) kRunTasks() string { return s.p + "runs" }

func (r runDoc) run(taskID string) rota.Run {
	return rota.Run{
		ID: r.ID, TaskID: taskID, WorkerID: r.Worker, WorkerAddress: r.Addr, Attempt: r.Attempt,
		Status: r.Status, StartTime: tm(r.Start), EndTime: tm(r.End), LeaseExpiresAt: tm(r.Lease),
		Deadline: tm(r.Deadline), StopRequested: r.Stop, Message: r.Msg,
	}
}

// expires is when the run stops being held (lease end or deadline).
func (r runDoc) expires() int64 { return store.RunExpiresAt(r.Lease, r.Deadline) }

// row is the task as the shared code reads it.
func (d *taskDoc) row() store.TaskRow {
	t := rota.Task{
		ID: d.ID, Kind: d.Kind, Priority: rota.PriorityOfLevel(d.Level), Payload: d.Payload, Key: d.Key,
		Status: d.Status, Attempt: d.Attempt, MaxRetries: d.MaxRetries, Workers: d.Workers,
		WorkerIDs: slices.Clone(d.WorkerIDs), TimeoutSeconds: d.TimeoutS, HeartbeatTimeoutSeconds: d.HBS,
		CreatedAt: tm(d.Created), RunAt: tm(d.RunAt), StartTime: tm(d.Start), EndTime: tm(d.End),
		WorkerAddress: d.Addr, IsSucceed: d.Status == rota.StatusSuccess, Message: d.Msg, Result: d.Result,
		ScheduleID: d.Sched, FireTime: tm(d.Fire),
	}
	if len(d.Parents) > 0 {
		t.DependsOn = slices.Clone(d.Parents)
	}
	return store.TaskRow{Task: t, Done: d.Done, Avail: d.Avail, StopRequested: d.Stop,
		Failures: d.Failures, Successes: d.Successes, Running: d.Running}
}

// task is the domain task without runs.
func (d *taskDoc) task() *rota.Task {
	r := d.row()
	return &r.Task
}

// fromRow takes the fields the shared code changes back from r.
func (d *taskDoc) fromRow(r *store.TaskRow) {
	d.Status, d.Done, d.Avail, d.Successes, d.Failures = r.Status, r.Done, r.Avail, r.Successes, r.Failures
	d.RunAt, d.End, d.Msg, d.Result = ms(r.RunAt), ms(r.EndTime), r.Message, r.Result
	d.Level, d.MaxRetries, d.HBS = r.Priority.Level(), r.MaxRetries, r.HeartbeatTimeoutSeconds
	d.WorkerIDs = r.WorkerIDs
}

// runIndex is the position of run id in d.Runs, or -1.
func (d *taskDoc) runIndex(id string) int {
	for i, r := range d.Runs {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// scheduleRun is the task as a schedule run.
func (d *taskDoc) scheduleRun() rota.ScheduleRun {
	return rota.ScheduleRun{
		TaskID: d.ID, ScheduleID: d.Sched, FireTime: tm(d.Fire), Attempt: d.SAttempt, Status: d.Status,
		Reason: rota.SkipReason(d.Skip), Triggered: d.Triggered, Held: d.Held, StopRequested: d.Stop,
		CreatedAt: tm(d.Created), StartTime: tm(d.Start), EndTime: tm(d.End), Message: d.Msg,
	}
}

// --- keys ------------------------------------------------------------------

func (s *Store) kTask(id string) string           { return s.p + "t:" + id }
func (s *Store) kHist(id string) string           { return s.p + "h:" + id }
func (s *Store) kChildren(id string) string       { return s.p + "ch:" + id }
func (s *Store) kKeyHolder(kind, k string) string { return s.p + "kk:" + kind + "\x00" + k }
func (s *Store) kIDs() string                     { return s.p + "ids" }
func (s *Store) kStatus(st rota.Status) string    { return s.p + "s:" + string(st) }
func (s *Store) kKindStatus(kind string, st rota.Status) string {
	return s.p + "ks:" + string(st) + ":" + kind
}
func (s *Store) kReady(kind string, level int, pinned bool) string {
	if pinned {
		return s.p + "rp:" + strconv.Itoa(level) + ":" + kind
	}
	return s.p + "r:" + strconv.Itoa(level) + ":" + kind
}
func (s *Store) kRunning() string                { return s.p + "running" }
func (s *Store) kKindRunning(kind string) string { return s.p + "rk:" + kind }
func (s *Store) kWorkerRuns(w string) string     { return s.p + "wr:" + w }
func (s *Store) kWorkerTasks(w string) string    { return s.p + "wt:" + w }
func (s *Store) kDone(kind string) string        { return s.p + "dn:" + kind }
func (s *Store) kSchedRuns(id string) string     { return s.p + "sr:" + id }
func (s *Store) kSchedOpen(id string) string     { return s.p + "so:" + id }
func (s *Store) kFire(sched string, fire int64) string {
	return s.p + "sf:" + sched + ":" + strconv.FormatInt(fire, 10)
}
func (s *Store) kKind(name string) string { return s.p + "k:" + name }
func (s *Store) kKinds() string           { return s.p + "kinds" }
func (s *Store) kWorker(id string) string { return s.p + "w:" + id }
func (s *Store) kWorkers() string         { return s.p + "workers" }

// kPushWorkers is the set of the workers with a push registration (by id,
// lexical), removed with the worker (WorkerPrune).
func (s *Store) kPushWorkers() string { return s.p + "pushworkers" }

// schedRunMember orders a schedule's runs by fire time, then task id.
func schedRunMember(fire int64, id string) string { return fmt.Sprintf("%016d:%s", fire, id) }

// --- index entries ---------------------------------------------------------

// entry is one sorted-set entry a task record implies.
type entry struct {
	key    string
	member string
	score  float64
}

// entries lists the index entries of task d (nil: none).
func (s *Store) entries(d *taskDoc) map[[2]string]float64 {
	if d == nil {
		return nil
	}
	e := map[[2]string]float64{
		{s.kIDs(), d.ID}:                        0,
		{s.kStatus(d.Status), d.ID}:             0,
		{s.kKindStatus(d.Kind, d.Status), d.ID}: 0,
	}
	if d.Avail && !d.Held && d.Waiting == 0 && !d.Done {
		e[[2]string{s.kReady(d.Kind, d.Level, len(d.WorkerIDs) > 0), d.ID}] = float64(d.RunAt)
	}
	if d.Done {
		e[[2]string{s.kDone(d.Kind), d.ID}] = float64(d.End)
	}
	if d.Sched != "" {
		e[[2]string{s.kSchedRuns(d.Sched), schedRunMember(d.Fire, d.ID)}] = 0
		if !d.Done {
			e[[2]string{s.kSchedOpen(d.Sched), schedRunMember(d.Fire, d.ID)}] = 0
		}
	}
	for _, w := range d.Ran {
		e[[2]string{s.kWorkerTasks(w), d.ID}] = 0
	}
	for _, r := range d.Runs {
		if r.Status != rota.StatusRunning {
			continue
		}
		id := r.ID
		e[[2]string{s.kRunning(), id}] = float64(r.expires())
		e[[2]string{s.kKindRunning(d.Kind), id}] = 0
		e[[2]string{s.kWorkerRuns(r.Worker), id + "\x00" + d.ID + "\x00" + d.Kind}] = float64(r.Start)
	}
	return e
}

// putTask writes task d (old: as read, nil for a new task) with the
// index changes between them.
func (t *tx) putTask(old, d *taskDoc) error {
	if err := t.put(t.s.kTask(d.ID), d); err != nil {
		return err
	}
	t.reindex(old, d)
	t.tasks[d.ID] = d
	return nil
}

// reindex moves the index entries of a task from old to d (nil: removed).
func (t *tx) reindex(old, d *taskDoc) {
	before, after := t.s.entries(old), t.s.entries(d)
	for k := range before {
		if _, ok := after[k]; !ok {
			t.zrem(k[0], k[1])
		}
	}
	for k, sc := range after {
		if prev, ok := before[k]; !ok || prev != sc {
			t.zadd(k[0], sc, k[1])
		}
	}
}

// clone copies d deeply enough that changing the copy leaves d as read.
func (d *taskDoc) clone() *taskDoc {
	c := *d
	c.Runs = slices.Clone(d.Runs)
	c.WorkerIDs = slices.Clone(d.WorkerIDs)
	c.Parents = slices.Clone(d.Parents)
	c.Ran = slices.Clone(d.Ran)
	return &c
}

// getTask reads task id, guarded; rota.ErrNotFound when absent.
func (t *tx) getTask(id string) (*taskDoc, error) {
	if d, ok := t.tasks[id]; ok {
		return d, nil
	}
	var d taskDoc
	found, err := t.get(t.s.kTask(id), &d)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.NotFoundError("task", id)
	}
	t.tasks[id] = &d
	return &d, nil
}
