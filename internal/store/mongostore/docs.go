package mongostore

import (
	"encoding/json"
	"slices"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// taskDoc is a task as stored: the task's fields, its bookkeeping and its
// runs (current and earlier), plus the derived arrays and fields that
// queries use (rids, rw, ws, exp, pinned). Instants are unix ms.
type taskDoc struct {
	ID         string   `bson:"_id"`
	V          int64    `bson:"v"` // version: every write is a compare-and-set on it
	Kind       string   `bson:"kind"`
	Level      int      `bson:"level"`
	Payload    string   `bson:"payload"`
	Key        string   `bson:"key,omitempty"`
	Status     string   `bson:"status"`
	Done       bool     `bson:"done"`
	Avail      bool     `bson:"avail"` // claimable but for its run_at and kind limits
	Attempt    int      `bson:"attempt"`
	Failures   int      `bson:"failures"`
	Successes  int      `bson:"successes"`
	Running    int      `bson:"running"`
	MaxRetries int      `bson:"max_retries"`
	Workers    int      `bson:"workers"`
	WorkerIDs  []string `bson:"worker_ids"`
	Pinned     bool     `bson:"pinned"`
	TimeoutS   int      `bson:"timeout_s"`
	HBTimeoutS int      `bson:"hb_s"`
	Stop       bool     `bson:"stop"`
	Created    int64    `bson:"created"`
	RunAt      int64    `bson:"run_at"`
	Start      int64    `bson:"start"`
	End        int64    `bson:"end"`
	WorkerAddr string   `bson:"waddr"`
	Message    string   `bson:"msg"`
	Result     string   `bson:"result,omitempty"`
	HasResult  bool     `bson:"has_result,omitempty"`
	Sched      string   `bson:"sched,omitempty"`
	Fire       int64    `bson:"fire,omitempty"`
	SAttempt   int      `bson:"sattempt,omitempty"`
	Skip       string   `bson:"skip,omitempty"`
	Triggered  bool     `bson:"triggered,omitempty"`
	Held       bool     `bson:"held,omitempty"`
	Deps       []string `bson:"deps,omitempty"`      // the tasks it depends on
	DepsWait   int      `bson:"deps_wait,omitempty"` // of them, not yet succeeded
	HasDeps    bool     `bson:"hasdeps,omitempty"`   // some task depends on it
	DepsDone   bool     `bson:"deps_done,omitempty"` // its end reached its dependents

	Runs []runDoc `bson:"runs"`
	// Derived on every write (see derive).
	RIDs []string `bson:"rids"`          // every run id
	RW   []string `bson:"rw"`            // workers of RUNNING runs
	WS   []string `bson:"ws"`            // workers of any run
	Exp  int64    `bson:"exp,omitempty"` // earliest expiry of a RUNNING run
	// Its entry in the ready collection while Avail (see ready.go),
	// and that entry's content.
	Ready string `bson:"ready,omitempty"`
	RK    string `bson:"rk,omitempty"`
}

// runDoc is one run inside its task document.
type runDoc struct {
	ID       string `bson:"id"`
	Worker   string `bson:"w"`
	Addr     string `bson:"addr"`
	Attempt  int    `bson:"n"`
	Status   string `bson:"st"`
	Start    int64  `bson:"start"`
	End      int64  `bson:"end"`
	Lease    int64  `bson:"lease"`
	Deadline int64  `bson:"deadline"`
	Stop     bool   `bson:"stop"`
	Message  string `bson:"msg"`
}

// derive recomputes the query fields from the runs and options.
func (t *taskDoc) derive() {
	t.RIDs, t.RW, t.WS, t.Exp = t.RIDs[:0], nil, nil, 0
	for _, r := range t.Runs {
		t.RIDs = append(t.RIDs, r.ID)
		if !slices.Contains(t.WS, r.Worker) {
			t.WS = append(t.WS, r.Worker)
		}
		if r.Status == string(rota.StatusRunning) {
			t.RW = append(t.RW, r.Worker)
			if e := store.RunExpiresAt(r.Lease, r.Deadline); t.Exp == 0 || e < t.Exp {
				t.Exp = e
			}
		}
	}
	if t.RIDs == nil {
		t.RIDs = []string{}
	}
	t.Pinned = len(t.WorkerIDs) > 0
	if t.WorkerIDs == nil {
		t.WorkerIDs = []string{}
	}
	if t.Runs == nil {
		t.Runs = []runDoc{}
	}
}

// run returns the index of run id, -1 if the task has none.
func (t *taskDoc) run(id string) int {
	for i := range t.Runs {
		if t.Runs[i].ID == id {
			return i
		}
	}
	return -1
}

// row is the task as the shared rules read it.
func (t *taskDoc) row() store.TaskRow {
	r := store.TaskRow{
		Task: rota.Task{
			ID: t.ID, Kind: t.Kind, Priority: rota.PriorityOfLevel(t.Level), Payload: json.RawMessage(t.Payload),
			Key: t.Key, Status: rota.Status(t.Status), Attempt: t.Attempt, MaxRetries: t.MaxRetries,
			Workers: t.Workers, TimeoutSeconds: t.TimeoutS, HeartbeatTimeoutSeconds: t.HBTimeoutS,
			CreatedAt: store.FromMillis(t.Created), RunAt: store.FromMillis(t.RunAt),
			StartTime: store.FromMillis(t.Start), EndTime: store.FromMillis(t.End), WorkerAddress: t.WorkerAddr,
			Message: t.Message, ScheduleID: t.Sched, FireTime: store.FromMillis(t.Fire),
		},
		Done: t.Done, Avail: t.Avail, StopRequested: t.Stop,
		Failures: t.Failures, Successes: t.Successes, Running: t.Running,
	}
	if len(t.WorkerIDs) > 0 {
		r.WorkerIDs = slices.Clone(t.WorkerIDs)
	}
	if t.HasResult {
		r.Result = json.RawMessage(t.Result)
	}
	r.IsSucceed = r.Status == rota.StatusSuccess
	return r
}

// setRow stores back what the shared rules changed in r.
func (t *taskDoc) setRow(r *store.TaskRow) {
	t.Level, t.Status, t.Done, t.Avail = r.Priority.Level(), string(r.Status), r.Done, r.Avail
	t.Failures, t.Successes, t.Running, t.Stop = r.Failures, r.Successes, r.Running, r.StopRequested
	t.MaxRetries, t.HBTimeoutS, t.WorkerIDs = r.MaxRetries, r.HeartbeatTimeoutSeconds, r.WorkerIDs
	t.RunAt, t.End, t.Message = store.Millis(r.RunAt), store.Millis(r.EndTime), r.Message
	t.Result, t.HasResult = string(r.Result), r.Result != nil
}

// task is the domain task, with its runs when withRuns.
func (t *taskDoc) task(withRuns bool) rota.Task {
	out := t.row().Task
	if len(t.Deps) > 0 {
		out.DependsOn = slices.Clone(t.Deps)
	}
	if withRuns {
		out.Runs = make([]rota.Run, len(t.Runs))
		for i, r := range t.Runs {
			out.Runs[i] = r.run(t.ID)
		}
	}
	return out
}

func (r runDoc) run(taskID string) rota.Run {
	return rota.Run{
		ID: r.ID, TaskID: taskID, WorkerID: r.Worker, WorkerAddress: r.Addr, Attempt: r.Attempt,
		Status: rota.Status(r.Status), StartTime: store.FromMillis(r.Start), EndTime: store.FromMillis(r.End),
		LeaseExpiresAt: store.FromMillis(r.Lease), Deadline: store.FromMillis(r.Deadline),
		StopRequested: r.Stop, Message: r.Message,
	}
}
