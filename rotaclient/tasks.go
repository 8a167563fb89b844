package rotaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// TaskParams describes a task to submit. Kind is required; every other
// field left at its zero value takes the server's default.
type TaskParams struct {
	// Kind names the handler that runs the task (rota.KindPattern).
	Kind string
	// Priority is high, mid or low; "" lets the server choose (mid).
	Priority rota.Priority
	// Payload is the task's JSON payload (the API's "task" field), handed to
	// the worker as submitted. It is encoded with encoding/json; a
	// json.RawMessage is sent as is. Nil sends {} (the API requires a
	// value other than null).
	Payload any
	// Key makes the submit idempotent: while a task of the same kind has
	// this key — unfinished or finished, until retention cleans it —
	// submitting again returns that task (Existing).
	Key string
	// RerunIfFinished, with Key: a finished task holding the key runs
	// again under its id (Rerun) instead of being returned as it is.
	RerunIfFinished bool
	// RunAt is the earliest time the task may run (sent as unix
	// milliseconds, run_at_ms). Zero means now, or Delay from now.
	RunAt time.Time
	// Delay postpones the task by this long from the server's now (sent in
	// whole seconds, rounded up). Use RunAt or Delay, not both.
	Delay time.Duration
	// MaxRetries is the number of failed runs tolerated before the task
	// fails; nil means the server default (3). new(0) means no retry.
	MaxRetries *int
	// TimeoutSeconds limits each run; 0 means no limit.
	TimeoutSeconds int
	// HeartbeatTimeoutSeconds is the lease length a worker's heartbeats
	// renew; 0 means the server default (30).
	HeartbeatTimeoutSeconds int
	// Workers is how many distinct workers must each run the task
	// successfully; 0 means 1.
	Workers int
	// WorkerIDs, when not empty, are the only workers allowed to run it.
	WorkerIDs []string
	// DependsOn names up to 100 tasks that must all succeed before this
	// one may run: task ids or, in SubmitBatch, "ref:NAME" for an earlier
	// item whose Ref is NAME (DependsOnRef). Until then the task is
	// WAITING; if one ends FAILED, CANCELED or TIMEOUT for good, this one
	// ends CANCELED with a message starting with "dependency_failed".
	DependsOn []string
	// Ref names this task within a SubmitBatch so that later items can
	// depend on it; only in SubmitBatch.
	Ref string
}

// DependsOnRef is the DependsOn entry naming the batch item whose Ref is
// ref.
func DependsOnRef(ref string) string { return "ref:" + ref }

// wire returns p as the API reads it.
func (p *TaskParams) wire() (rotaapi.SubmitRequest, error) {
	w, _, err := p.wireCompact()
	return w, err
}

// wireCompact is wire, also reporting whether the payload is known to be
// valid and compact JSON (json.Marshal wrote it), not a caller's raw
// message.
func (p *TaskParams) wireCompact() (w rotaapi.SubmitRequest, compact bool, err error) {
	var payload json.RawMessage
	switch v := p.Payload.(type) {
	case json.RawMessage:
		payload = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return rotaapi.SubmitRequest{}, false, &rota.Error{Code: rota.CodeInvalid, Field: "task", Message: fmt.Sprintf("field %q: encode payload: %v", "task", err)}
		}
		payload, compact = b, true
	}
	if len(payload) == 0 || string(payload) == "null" && p.Payload == nil {
		payload, compact = json.RawMessage("{}"), true
	}
	w = rotaapi.SubmitRequest{
		Kind: p.Kind, Priority: nonEmpty(p.Priority), Task: payload, Key: nonEmpty(p.Key),
		RerunIfFinished: p.RerunIfFinished,
		MaxRetries:      p.MaxRetries, TimeoutSeconds: nonZero(p.TimeoutSeconds),
		HeartbeatTimeoutSeconds: nonZero(p.HeartbeatTimeoutSeconds), Workers: nonZero(p.Workers), WorkerIDs: p.WorkerIDs,
		DependsOn: p.DependsOn, Ref: p.Ref,
	}
	if !p.RunAt.IsZero() {
		w.RunAtMS = new(max(p.RunAt.UnixMilli(), 1))
	}
	if p.Delay > 0 {
		w.DelaySeconds = new(int64((p.Delay + time.Second - 1) / time.Second))
	}
	return w, compact, nil
}

// nonZero returns a pointer to n, nil for 0.
func nonZero(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// SubmitResult is the outcome of one submit: TaskID is the new task's id,
// or the existing task's when Existing (the task holding the same kind and
// key was found and nothing new was stored); Rerun when that task was
// finished and runs again (TaskParams.RerunIfFinished).
type SubmitResult = rotaapi.SubmitResult

// Submit stores a new task (POST /api/tasks). Invalid parameters give a
// *rota.Error matching rota.ErrInvalid whose Field names the culprit.
func (c *Client) Submit(ctx context.Context, p TaskParams) (SubmitResult, error) {
	w, err := p.wire()
	if err != nil {
		return SubmitResult{}, err
	}
	var out SubmitResult
	err = c.Do(ctx, http.MethodPost, "/api/tasks", w, &out)
	return out, err
}

// SubmitBatch stores several tasks in one transaction (POST
// /api/tasks/batch): either all are stored or, on error, none. Results are
// in the order of ps.
func (c *Client) SubmitBatch(ctx context.Context, ps []TaskParams) ([]SubmitResult, error) {
	// The body (a rotaapi.BatchSubmitRequest) is written here, each task
	// encoded once and by hand (batchwire.go): marshalling the request
	// with its tasks as raw messages scanned every task's JSON again, a
	// tenth of a core of a 32-client batch load.
	body := make([]byte, 0, 16+96*len(ps))
	body = append(body, `{"tasks":[`...)
	for i := range ps {
		w, compact, err := ps[i].wireCompact()
		if err != nil {
			if e, ok := err.(*rota.Error); ok {
				e.Field = fmt.Sprintf("tasks[%d].%s", i, e.Field)
				e.Message = fmt.Sprintf("tasks[%d]: %s", i, e.Message)
			}
			return nil, err
		}
		if i > 0 {
			body = append(body, ',')
		}
		if body, err = appendSubmit(body, &w, compact); err != nil {
			return nil, fmt.Errorf("rotaclient: encode tasks[%d]: %w", i, err)
		}
	}
	body = append(body, "]}"...)
	const path = "/api/tasks/batch"
	status, raw, err := c.send(ctx, http.MethodPost, path, true, body)
	if err != nil {
		return nil, err
	}
	if status < 300 {
		if res, ok := decodeBatchFast(raw); ok {
			return res, nil
		}
	}
	var out rotaapi.BatchSubmitResponse
	if err := decodeResponse(http.MethodPost, path, status, raw, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetTask returns a task with its runs, oldest first (GET /api/tasks/{id}).
// An unknown id gives an error matching rota.ErrNotFound.
func (c *Client) GetTask(ctx context.Context, id string) (*rota.Task, error) {
	return c.taskCall(ctx, http.MethodGet, "/api/tasks/"+escape(id), nil)
}

func (c *Client) taskCall(ctx context.Context, method, path string, in any) (*rota.Task, error) {
	var w taskDetailIn
	if err := c.Do(ctx, method, path, in, &w); err != nil {
		return nil, err
	}
	t := w.task()
	return &t, nil
}

// ListParams filters and pages ListTasks. Zero fields do not filter.
type ListParams struct {
	// Kind keeps the tasks of this kind.
	Kind string
	// Status keeps the tasks in this status.
	Status rota.Status
	// Statuses keeps the tasks in any of these statuses (with Status).
	Statuses []rota.Status
	// Key keeps the tasks with this idempotency key.
	Key string
	// DependsOn keeps the tasks that depend on this task id.
	DependsOn string
	// Priority keeps the tasks of this priority.
	Priority rota.Priority
	// WorkerID keeps the tasks with a run by this worker.
	WorkerID string
	// Search keeps the tasks whose id is it, or whose key or message
	// contains it (case-insensitive).
	Search string
	// Limit is the page size; 0 means the server's default.
	Limit int
	// Cursor continues after a previous page (its NextCursor).
	Cursor string
}

// Encode returns the query string of GET /api/tasks for p, with its
// leading "?" ("" when p filters nothing), for use with Do.
func (p ListParams) Encode() string {
	q := url.Values{}
	if p.Kind != "" {
		q.Set("kind", p.Kind)
	}
	var statuses []string
	if p.Status != "" {
		statuses = append(statuses, string(p.Status))
	}
	for _, st := range p.Statuses {
		statuses = append(statuses, string(st))
	}
	if len(statuses) > 0 {
		q.Set("status", strings.Join(statuses, ","))
	}
	if p.Key != "" {
		q.Set("key", p.Key)
	}
	if p.DependsOn != "" {
		q.Set("depends_on", p.DependsOn)
	}
	if p.Priority != "" {
		q.Set("priority", string(p.Priority))
	}
	if p.WorkerID != "" {
		q.Set("worker_id", p.WorkerID)
	}
	if p.Search != "" {
		q.Set("q", p.Search)
	}
	return pageQuery(q, p.Limit, p.Cursor)
}

// TaskCounts is how many tasks match a filter, by status.
type TaskCounts = rotaapi.TaskCounts

// CountTasks counts the tasks matching p's filters but its statuses (and
// its Limit and Cursor), by status (GET /api/tasks/counts).
func (c *Client) CountTasks(ctx context.Context, p ListParams) (TaskCounts, error) {
	p.Status, p.Statuses, p.Limit, p.Cursor = "", nil, 0, ""
	var out TaskCounts
	err := c.Do(ctx, http.MethodGet, "/api/tasks/counts"+p.Encode(), nil, &out)
	return out, err
}

// TaskPage is one page of tasks, newest first, without their runs.
type TaskPage struct {
	// Tasks are the page's tasks, newest first.
	Tasks []rota.Task
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

// ListTasks returns one page of tasks (GET /api/tasks).
func (c *Client) ListTasks(ctx context.Context, p ListParams) (*TaskPage, error) {
	tasks, next, err := listPage(ctx, c, "/api/tasks"+p.Encode(), func(w *taskListIn) ([]rota.Task, string) {
		return convert(w.Tasks, (*taskIn).task), w.NextCursor
	})
	if err != nil {
		return nil, err
	}
	return &TaskPage{Tasks: tasks, NextCursor: next}, nil
}

// AllTasks iterates over every task that matches p, newest first, fetching
// pages of p.Limit as the loop goes (starting at p.Cursor). An error ends
// the iteration after being yielded once with a zero Task.
//
//	for t, err := range c.AllTasks(ctx, rotaclient.ListParams{Kind: "email"}) {
//		if err != nil { return err }
//		...
//	}
func (c *Client) AllTasks(ctx context.Context, p ListParams) iter.Seq2[rota.Task, error] {
	return allPages(p.Cursor, func(cursor string) ([]rota.Task, string, error) {
		p.Cursor = cursor
		page, err := c.ListTasks(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return page.Tasks, page.NextCursor, nil
	})
}

// RunAgain submits a copy of a task as a new task and returns the new id
// (POST /api/tasks/run_again/{id}).
func (c *Client) RunAgain(ctx context.Context, id string) (string, error) {
	var out rotaapi.SubmitResponse
	if err := c.Do(ctx, http.MethodPost, "/api/tasks/run_again/"+escape(id), nil, &out); err != nil {
		return "", err
	}
	return out.TaskID, nil
}

// StopTask cancels a task (POST /api/tasks/stop/{id}): a waiting task ends
// CANCELED at once; a running one is asked to stop through its runs'
// heartbeats and ends CANCELED when they end. A finished task gives an
// error matching rota.ErrConflict.
func (c *Client) StopTask(ctx context.Context, id string) (*rota.Task, error) {
	return c.taskCall(ctx, http.MethodPost, "/api/tasks/stop/"+escape(id), nil)
}

// UpdateParams changes the options of an unfinished task; nil fields are
// left as they are. It is the body of PATCH /api/tasks/{id}.
type UpdateParams = rotaapi.TaskUpdateRequest

// UpdateTask changes a task's options (PATCH /api/tasks/{id}). A finished
// task gives an error matching rota.ErrConflict.
func (c *Client) UpdateTask(ctx context.Context, id string, p UpdateParams) (*rota.Task, error) {
	return c.taskCall(ctx, http.MethodPatch, "/api/tasks/"+escape(id), p)
}

// listPage gets one page of a listing (GET path): the data decodes into
// W, from which page takes the items and the next cursor.
func listPage[W, T any](ctx context.Context, c *Client, path string, page func(*W) ([]T, string)) ([]T, string, error) {
	var w W
	if err := c.Do(ctx, http.MethodGet, path, nil, &w); err != nil {
		return nil, "", err
	}
	items, next := page(&w)
	return items, next, nil
}

// pageQuery adds a page's limit (0: the server's default) and cursor to
// q and returns the query string with its leading "?", "" when empty.
func pageQuery(q url.Values, limit int, cursor string) string {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return encodeQuery(q)
}

// encodeQuery returns q as a query string with its leading "?", "" when
// empty.
func encodeQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// allPages iterates over the items of a paged listing from cursor on,
// fetching each page as the loop reaches it. An error ends the iteration
// after being yielded once with a zero item.
func allPages[T any](cursor string, fetch func(cursor string) (items []T, next string, err error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := cursor // each range over the sequence starts afresh
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, v := range items {
				if !yield(v, nil) {
					return
				}
			}
			if next == "" || next == cursor {
				return
			}
			cursor = next
		}
	}
}
