package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// mountTasks registers the task routes.
func (a *API) mountTasks(mux *http.ServeMux) {
	mount(a, mux, "POST /api/tasks", bodyRequired, a.taskSubmit)
	mount(a, mux, "POST /api/tasks/batch", bodyRequired, a.taskSubmitBatch)
	mount(a, mux, "GET /api/tasks", bodyNone, a.taskList)
	mount(a, mux, "GET /api/tasks/{id}", bodyNone, a.taskGet)
	mount(a, mux, "PATCH /api/tasks/{id}", bodyRequired, a.taskUpdate)
	mount(a, mux, "POST /api/tasks/run_again/{id}", bodyOptional, a.taskRunAgain)
	mount(a, mux, "POST /api/tasks/stop/{id}", bodyOptional, a.taskStop)
}

// submitRequest is the body of POST /api/tasks and one item of a batch.
type submitRequest struct {
	Kind                    string          `json:"kind"`
	Priority                *string         `json:"priority"`
	Task                    json.RawMessage `json:"task"`
	Key                     *string         `json:"key"`
	RunAt                   *int64          `json:"run_at"`
	DelaySeconds            *int64          `json:"delay_seconds"`
	RunAtMS                 *int64          `json:"run_at_ms"` // unix milliseconds: run_at with sub-second precision
	MaxRetries              *int            `json:"max_retries"`
	TimeoutSeconds          *int            `json:"timeout_seconds"`
	HeartbeatTimeoutSeconds *int            `json:"heartbeat_timeout_seconds"`
	WorkerIDs               []string        `json:"worker_ids"`
	Workers                 *int            `json:"workers"`

	params store.TaskInsertParams // set by validate
}

func (s *submitRequest) validate(a *API) error {
	p, err := s.check(a.maxPayload, "", a.disp.Now())
	s.params = p
	return err
}

// check validates a submit whose fields sit under the JSON path prefix and
// returns the insert it stands for (without its ID), applying defaults.
func (s *submitRequest) check(maxPayload int64, prefix string, now time.Time) (store.TaskInsertParams, error) {
	f := func(name string) string { return joinPath(prefix, name) }
	p := store.TaskInsertParams{
		Kind:                    s.Kind,
		MaxRetries:              store.DefaultMaxRetries,
		HeartbeatTimeoutSeconds: store.DefaultHeartbeatTimeout,
		Workers:                 1,
		RunAt:                   now,
		Now:                     now,
	}
	var err error
	if err := checkKind(f("kind"), s.Kind); err != nil {
		return p, err
	}
	if p.Priority, err = checkPriority(f("priority"), s.Priority); err != nil {
		return p, err
	}
	if len(s.Task) == 0 || bytes.Equal(s.Task, []byte("null")) {
		return p, rota.Invalid(f("task"), "is required: any JSON value but null")
	}
	if n := int64(len(s.Task)); n > maxPayload {
		return p, tooLarge(f("task"), n, maxPayload)
	}
	p.Payload = s.Task
	if s.Key != nil {
		if err := checkName(f("key"), *s.Key, maxKeyLen); err != nil {
			return p, err
		}
		p.Key = *s.Key
	}
	switch {
	case s.RunAt != nil && s.DelaySeconds != nil:
		return p, rota.Invalid(f("delay_seconds"), "give run_at or delay_seconds, not both")
	case s.RunAtMS != nil && (s.RunAt != nil || s.DelaySeconds != nil):
		return p, rota.Invalid(f("run_at_ms"), "give one of run_at, run_at_ms or delay_seconds")
	case s.RunAtMS != nil:
		if err := checkRange(f("run_at_ms"), *s.RunAtMS, 0, maxRunAt*1000); err != nil {
			return p, err
		}
		if at := time.UnixMilli(*s.RunAtMS).UTC(); at.After(now) {
			p.RunAt = at
		}
	case s.RunAt != nil:
		if err := checkRange(f("run_at"), *s.RunAt, 0, maxRunAt); err != nil {
			return p, err
		}
		if at := time.Unix(*s.RunAt, 0).UTC(); at.After(now) {
			p.RunAt = at
		}
	case s.DelaySeconds != nil:
		if err := checkRange(f("delay_seconds"), *s.DelaySeconds, 0, maxDelaySeconds); err != nil {
			return p, err
		}
		p.RunAt = now.Add(time.Duration(*s.DelaySeconds) * time.Second)
	}
	if s.MaxRetries != nil {
		if err := checkRange(f("max_retries"), *s.MaxRetries, 0, maxRetriesCap); err != nil {
			return p, err
		}
		p.MaxRetries = *s.MaxRetries
	}
	if s.TimeoutSeconds != nil {
		if err := checkRange(f("timeout_seconds"), *s.TimeoutSeconds, 0, maxTimeoutSeconds); err != nil {
			return p, err
		}
		p.TimeoutSeconds = *s.TimeoutSeconds
	}
	if s.HeartbeatTimeoutSeconds != nil {
		if err := checkRange(f("heartbeat_timeout_seconds"), *s.HeartbeatTimeoutSeconds, 1, maxHeartbeatTimeout); err != nil {
			return p, err
		}
		p.HeartbeatTimeoutSeconds = *s.HeartbeatTimeoutSeconds
	}
	if p.WorkerIDs, err = checkWorkerIDs(f("worker_ids"), s.WorkerIDs); err != nil {
		return p, err
	}
	if len(p.WorkerIDs) == 0 {
		p.WorkerIDs = nil
	}
	if s.Workers != nil {
		if err := checkRange(f("workers"), *s.Workers, 1, maxWorkersCap); err != nil {
			return p, err
		}
		p.Workers = *s.Workers
	}
	if n := len(p.WorkerIDs); n > 0 && p.Workers > n {
		return p, rota.Invalid(f("workers"), "is %d but only %d workers are allowed by worker_ids: the task could never finish", p.Workers, n)
	}
	return p, nil
}

// submitResponse is the data of POST /api/tasks.
type submitResponse struct {
	TaskID   string `json:"task_id"`
	Existing bool   `json:"existing,omitempty"` // an unfinished task with the same kind and key was returned
}

// taskSubmit stores a new task, or returns the unfinished task of the same
// kind and key.
//
// POST /api/tasks
func (a *API) taskSubmit(ctx context.Context, req *submitRequest) (*submitResponse, error) {
	p := req.params
	p.ID = a.disp.NewID()
	res, err := a.disp.Submit(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return nil, fmt.Errorf("submit task: %w", err)
	}
	return &submitResponse{TaskID: res[0].Task.ID, Existing: res[0].Existing}, nil
}

// batchRequest is the body of POST /api/tasks/batch.
type batchRequest struct {
	Tasks []json.RawMessage `json:"tasks"`

	params []store.TaskInsertParams // set by validate
}

func (b *batchRequest) bodyLimit(a *API) int64 { return a.maxBatchBody }

func (b *batchRequest) validate(a *API) error { return b.checkItems(a, a.disp.Now()) }

// checkItems decodes and checks each item, naming the item at fault
// (tasks[3].kind).
func (b *batchRequest) checkItems(a *API, now time.Time) error {
	if n := len(b.Tasks); n == 0 || n > maxBatch {
		return rota.Invalid("tasks", "must hold 1 to %d tasks, got %d", maxBatch, n)
	}
	b.params = make([]store.TaskInsertParams, len(b.Tasks))
	for i, raw := range b.Tasks {
		prefix := fmt.Sprintf("tasks[%d]", i)
		var s submitRequest
		if err := decodeStrict(raw, &s, prefix); err != nil {
			return err
		}
		p, err := s.check(a.maxPayload, prefix, now)
		if err != nil {
			return err
		}
		b.params[i] = p
	}
	return nil
}

// batchResult is one item of the data of POST /api/tasks/batch.
type batchResult struct {
	TaskID   string `json:"task_id"`
	Existing bool   `json:"existing"`
}

// batchResponse is the data of POST /api/tasks/batch.
type batchResponse struct {
	Results []batchResult `json:"results"`
}

// taskSubmitBatch stores up to 1000 tasks in one transaction: all or none.
//
// POST /api/tasks/batch
func (a *API) taskSubmitBatch(ctx context.Context, req *batchRequest) (*batchResponse, error) {
	for i := range req.params {
		req.params[i].ID = a.disp.NewID()
	}
	res, err := a.disp.Submit(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("submit batch: %w", err)
	}
	out := &batchResponse{Results: make([]batchResult, len(res))}
	for i, r := range res {
		out.Results[i] = batchResult{TaskID: r.Task.ID, Existing: r.Existing}
	}
	return out, nil
}

// listRequest holds the query of GET /api/tasks.
type listRequest struct {
	params store.TaskListParams
}

func (l *listRequest) readRequest(r *http.Request) error {
	q, err := singleValues(r)
	if err != nil {
		return err
	}
	l.params.Limit = defaultListLimit
	for name, v := range q {
		switch name {
		case "kind":
			if v != "" {
				if err := checkKind(name, v); err != nil {
					return err
				}
			}
			l.params.Kind = v
		case "status":
			if l.params.Status, err = parseStatus(name, v); err != nil {
				return err
			}
		case "key":
			if v != "" {
				if err := checkName(name, v, maxKeyLen); err != nil {
					return err
				}
			}
			l.params.Key = v
		case "cursor":
			if v != "" {
				if err := checkID(name, v); err != nil {
					return rota.Invalid(name, "must be the next_cursor of a previous page (32 lowercase hex characters), got %s", shortQuote(v))
				}
			}
			l.params.Cursor = v
		case "limit":
			if l.params.Limit, err = parseLimit(name, v, l.params.Limit); err != nil {
				return err
			}
		default:
			return unknownParam(name, "kind, status, key, limit and cursor")
		}
	}
	return nil
}

func statusList() string {
	var names []string
	for _, s := range rota.Statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// listResponse is the data of GET /api/tasks.
type listResponse struct {
	Tasks      []taskJSON `json:"tasks"`
	NextCursor string     `json:"next_cursor"` // "" on the last page
}

// taskList lists tasks newest first, one page at a time.
//
// GET /api/tasks?kind=&status=&key=&limit=&cursor=
func (a *API) taskList(ctx context.Context, req *listRequest) (*listResponse, error) {
	res, err := a.store.TaskList(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out := &listResponse{Tasks: make([]taskJSON, 0, len(res.Tasks)), NextCursor: res.NextCursor}
	for i := range res.Tasks {
		out.Tasks = append(out.Tasks, toTaskJSON(&res.Tasks[i]))
	}
	return out, nil
}

// taskIDRequest names a task in the path; its body, if any, must be {}.
type taskIDRequest struct {
	id string
}

func (t *taskIDRequest) readRequest(r *http.Request) error {
	t.id = r.PathValue("id")
	return checkID("id", t.id)
}

// taskGet returns a task with its runs.
//
// GET /api/tasks/{id}
func (a *API) taskGet(ctx context.Context, req *taskIDRequest) (*taskDetailJSON, error) {
	t, err := a.store.TaskGet(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	return toTaskDetailJSON(t), nil
}

// taskRunAgain submits a copy of a task: same kind, priority, payload and
// options, no key, due now.
//
// POST /api/tasks/run_again/{id}
func (a *API) taskRunAgain(ctx context.Context, req *taskIDRequest) (*submitResponse, error) {
	t, err := a.store.TaskGet(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("run again: %w", err)
	}
	now := a.disp.Now()
	p := store.TaskInsertParams{
		ID:                      a.disp.NewID(),
		Kind:                    t.Kind,
		Priority:                t.Priority,
		Payload:                 t.Payload,
		RunAt:                   now,
		MaxRetries:              t.MaxRetries,
		TimeoutSeconds:          t.TimeoutSeconds,
		HeartbeatTimeoutSeconds: t.HeartbeatTimeoutSeconds,
		Workers:                 t.Workers,
		WorkerIDs:               t.WorkerIDs,
		Now:                     now,
	}
	res, err := a.disp.Submit(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return nil, fmt.Errorf("run again %s: %w", t.ID, err)
	}
	return &submitResponse{TaskID: res[0].Task.ID}, nil
}

// stopRequest is POST /api/tasks/stop/{id} with an optional message.
type stopRequest struct {
	taskIDRequest
	Message *string `json:"message"`
}

func (s *stopRequest) validate(*API) error {
	if s.Message != nil {
		*s.Message = truncateMessage(*s.Message)
	}
	return nil
}

// taskStop cancels a task: a waiting one at once, a running one through the
// next heartbeat of its runs.
//
// POST /api/tasks/stop/{id}
func (a *API) taskStop(ctx context.Context, req *stopRequest) (*taskDetailJSON, error) {
	msg := ""
	if req.Message != nil {
		msg = *req.Message
	}
	t, err := a.disp.StopTask(ctx, req.id, msg)
	if err != nil {
		return nil, fmt.Errorf("stop task: %w", err)
	}
	return toTaskDetailJSON(t), nil
}

// updateRequest is the body of PATCH /api/tasks/{id}: absent (or null)
// fields are left as they are.
type updateRequest struct {
	taskIDRequest
	Priority                *string   `json:"priority"`
	WorkerIDs               *[]string `json:"worker_ids"`
	HeartbeatTimeoutSeconds *int      `json:"heartbeat_timeout_seconds"`
	MaxRetries              *int      `json:"max_retries"`

	params store.TaskUpdateParams // set by validate
}

func (u *updateRequest) validate(*API) error {
	u.params.ID = u.id
	if u.Priority != nil {
		p, err := checkPriority("priority", u.Priority)
		if err != nil {
			return err
		}
		u.params.Priority = &p
	}
	if u.WorkerIDs != nil {
		ids, err := checkWorkerIDs("worker_ids", *u.WorkerIDs)
		if err != nil {
			return err
		}
		u.params.WorkerIDs = &ids
	}
	if u.HeartbeatTimeoutSeconds != nil {
		if err := checkRange("heartbeat_timeout_seconds", *u.HeartbeatTimeoutSeconds, 1, maxHeartbeatTimeout); err != nil {
			return err
		}
		u.params.HeartbeatTimeoutSeconds = u.HeartbeatTimeoutSeconds
	}
	if u.MaxRetries != nil {
		if err := checkRange("max_retries", *u.MaxRetries, 0, maxRetriesCap); err != nil {
			return err
		}
		u.params.MaxRetries = u.MaxRetries
	}
	return nil
}

// taskUpdate changes the priority, allowed workers, heartbeat timeout or
// retry budget of an unfinished task. Narrowing worker_ids stops the runs
// of the workers no longer allowed.
//
// PATCH /api/tasks/{id}
func (a *API) taskUpdate(ctx context.Context, req *updateRequest) (*taskDetailJSON, error) {
	t, err := a.disp.Update(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("update task: %w", err)
	}
	return toTaskDetailJSON(t), nil
}
