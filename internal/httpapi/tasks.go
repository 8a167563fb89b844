package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// mountTasks registers the task routes.
func (a *API) mountTasks(mux *http.ServeMux) {
	mount(a, mux, "POST /api/tasks", bodyRequired, a.taskSubmit)
	mount(a, mux, "POST /api/tasks/batch", bodyRequired, a.taskSubmitBatch)
	mount(a, mux, "GET /api/tasks", bodyNone, a.taskList)
	mount(a, mux, "GET /api/tasks/counts", bodyNone, a.taskCounts)
	mount(a, mux, "GET /api/tasks/{id}", bodyNone, a.taskGet)
	mount(a, mux, "PATCH /api/tasks/{id}", bodyRequired, a.taskUpdate)
	mount(a, mux, "POST /api/tasks/run_again/{id}", bodyOptional, a.taskRunAgain)
	mount(a, mux, "POST /api/tasks/stop/{id}", bodyOptional, a.taskStop)
}

// submitRequest is the body of POST /api/tasks and one item of a batch.
type submitRequest struct {
	rotaapi.SubmitRequest

	params store.TaskInsertParams // set by validate
}

func (s *submitRequest) validate(a *API) error {
	p, err := s.check(a.maxPayload, "", a.disp.Now())
	s.params = p
	if err != nil {
		return err
	}
	if s.Ref != "" {
		return rota.Invalid("ref", "names an item of a batch: only in POST /api/tasks/batch")
	}
	if err := s.checkDeps("", nil, &s.params); err != nil {
		return err
	}
	return a.checkAccepted("kind", p.Kind)
}

// refPrefix marks a dependency on an earlier item of a batch by its ref.
const refPrefix = "ref:"

// checkDeps checks depends_on (at most store.MaxDependencies task ids, or
// in a batch "ref:NAME" of an earlier item: refs maps the refs seen so far
// to their item index) and sets p's dependencies.
func (s *submitRequest) checkDeps(prefix string, refs map[string]int, p *store.TaskInsertParams) error {
	f := func(name string) string { return joinPath(prefix, name) }
	if n := len(s.DependsOn); n > store.MaxDependencies {
		return rota.Invalid(f("depends_on"), "names %d tasks, at most %d allowed", n, store.MaxDependencies)
	}
	for j, d := range s.DependsOn {
		field := fmt.Sprintf("%s[%d]", f("depends_on"), j)
		if ref, ok := strings.CutPrefix(d, refPrefix); ok {
			i, known := refs[ref]
			if !known {
				return rota.Invalid(field, "is %s, which names no earlier item of the batch (an item's \"ref\")", shortQuote(d))
			}
			p.DependsOnItems = append(p.DependsOnItems, i)
			continue
		}
		if err := checkID(field, d); err != nil {
			return rota.Invalid(field, "must be a task id (32 lowercase hex characters) or, in a batch, \"ref:\" and an earlier item's ref; got %s", shortQuote(d))
		}
		p.DependsOn = append(p.DependsOn, d)
	}
	return nil
}

// depsError names the field of a dependency error of the store: the
// batch item's depends_on in a batch.
func depsError(err error, batch bool) error {
	var (
		ie *store.ItemError
		re *rota.Error
	)
	if !errors.As(err, &ie) || !errors.As(ie.Err, &re) {
		return err
	}
	field := re.Field
	if batch {
		field = fmt.Sprintf("tasks[%d].%s", ie.Index, re.Field)
	}
	return rota.Invalid(field, "%s", re.Message)
}

// checkAccepted refuses a kind that Config.AcceptKind does not accept,
// naming field.
func (a *API) checkAccepted(field, kind string) error {
	if a.acceptKind == nil || a.acceptKind(kind) {
		return nil
	}
	return rota.Invalid(field, "is %q, a kind this server does not declare: it accepts only the kinds of its kinds file (--strict-kinds)", kind)
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
	if p.Payload, err = checkPayload(f("task"), s.Task, maxPayload); err != nil {
		return p, err
	}
	if s.Key != nil {
		if err := checkName(f("key"), *s.Key, maxKeyLen); err != nil {
			return p, err
		}
		p.Key = *s.Key
	}
	if s.RerunIfFinished {
		if p.Key == "" {
			return p, rota.Invalid(f("rerun_if_finished"), "needs a key: it reruns the finished task holding the key")
		}
		p.RerunIfFinished = true
	}
	if err := s.checkRunAt(f, now, &p); err != nil {
		return p, err
	}
	if err := s.checkLimits(f, &p); err != nil {
		return p, err
	}
	if err := s.checkWorkers(f, &p); err != nil {
		return p, err
	}
	return p, nil
}

// checkPayload checks a task's payload: any JSON value but null, at most
// maxPayload bytes.
func checkPayload(field string, task json.RawMessage, maxPayload int64) (json.RawMessage, error) {
	if len(task) == 0 || bytes.Equal(task, []byte("null")) {
		return nil, rota.Invalid(field, "is required: any JSON value but null")
	}
	if n := int64(len(task)); n > maxPayload {
		return nil, tooLarge(field, n, maxPayload)
	}
	return task, nil
}

// checkRunAt sets p.RunAt from one of run_at, run_at_ms or delay_seconds
// (a past instant means now).
func (s *submitRequest) checkRunAt(f func(string) string, now time.Time, p *store.TaskInsertParams) error {
	switch {
	case s.RunAt != nil && s.DelaySeconds != nil:
		return rota.Invalid(f("delay_seconds"), "give run_at or delay_seconds, not both")
	case s.RunAtMS != nil && (s.RunAt != nil || s.DelaySeconds != nil):
		return rota.Invalid(f("run_at_ms"), "give one of run_at, run_at_ms or delay_seconds")
	case s.RunAtMS != nil:
		if err := checkRange(f("run_at_ms"), *s.RunAtMS, 0, maxRunAt*1000); err != nil {
			return err
		}
		if at := time.UnixMilli(*s.RunAtMS).UTC(); at.After(now) {
			p.RunAt = at
		}
	case s.RunAt != nil:
		if err := checkRange(f("run_at"), *s.RunAt, 0, maxRunAt); err != nil {
			return err
		}
		if at := time.Unix(*s.RunAt, 0).UTC(); at.After(now) {
			p.RunAt = at
		}
	case s.DelaySeconds != nil:
		if err := checkRange(f("delay_seconds"), *s.DelaySeconds, 0, maxDelaySeconds); err != nil {
			return err
		}
		p.RunAt = now.Add(time.Duration(*s.DelaySeconds) * time.Second)
	}
	return nil
}

// checkLimits sets the retry budget and the timeouts given.
func (s *submitRequest) checkLimits(f func(string) string, p *store.TaskInsertParams) error {
	if s.MaxRetries != nil {
		if err := checkRange(f("max_retries"), *s.MaxRetries, 0, maxRetriesCap); err != nil {
			return err
		}
		p.MaxRetries = *s.MaxRetries
	}
	if s.TimeoutSeconds != nil {
		if err := checkRange(f("timeout_seconds"), *s.TimeoutSeconds, 0, maxTimeoutSeconds); err != nil {
			return err
		}
		p.TimeoutSeconds = *s.TimeoutSeconds
	}
	if s.HeartbeatTimeoutSeconds != nil {
		if err := checkRange(f("heartbeat_timeout_seconds"), *s.HeartbeatTimeoutSeconds, 1, maxHeartbeatTimeout); err != nil {
			return err
		}
		p.HeartbeatTimeoutSeconds = *s.HeartbeatTimeoutSeconds
	}
	return nil
}

// checkWorkers sets the allowed workers and the number of workers that
// must each run the task, refusing a number the allowed ones cannot reach.
func (s *submitRequest) checkWorkers(f func(string) string, p *store.TaskInsertParams) error {
	ids, err := checkWorkerIDs(f("worker_ids"), s.WorkerIDs)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		p.WorkerIDs = ids
	}
	if s.Workers != nil {
		if err := checkRange(f("workers"), *s.Workers, 1, maxWorkersCap); err != nil {
			return err
		}
		p.Workers = *s.Workers
	}
	if n := len(p.WorkerIDs); n > 0 && p.Workers > n {
		return rota.Invalid(f("workers"), "is %d but only %d workers are allowed by worker_ids: the task could never finish", p.Workers, n)
	}
	return nil
}

// taskSubmit stores a new task, or returns the unfinished task of the same
// kind and key.
//
// POST /api/tasks
func (a *API) taskSubmit(ctx context.Context, req *submitRequest) (*rotaapi.SubmitResponse, error) {
	p := req.params
	if err := checkKindAllowed(ctx, "kind", p.Kind); err != nil {
		return nil, err
	}
	p.ID = a.disp.NewID()
	res, err := a.disp.Submit(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return nil, fmt.Errorf("submit task: %w", depsError(err, false))
	}
	return &rotaapi.SubmitResponse{TaskID: res[0].Task.ID, Existing: res[0].Existing, Rerun: res[0].Rerun}, nil
}

// batchRequest is the body of POST /api/tasks/batch.
type batchRequest struct {
	rotaapi.BatchSubmitRequest

	// items are the tasks, read by decodeFast (nil when the strict
	// decoder read the body: Tasks are then decoded one by one), in
	// buffers of batchBufs that checkItems gives back.
	items []rotaapi.SubmitRequest
	bufs  *batchBuf

	params []store.TaskInsertParams // set by validate
}

func (b *batchRequest) bodyLimit(a *API) int64 { return a.maxBatchBody }

func (b *batchRequest) validate(a *API) error { return b.checkItems(a, a.disp.Now()) }

// checkItems decodes and checks each item, naming the item at fault
// (tasks[3].kind).
func (b *batchRequest) checkItems(a *API, now time.Time) error {
	defer b.release()
	if n := len(b.Tasks); n == 0 || n > maxBatch {
		return rota.Invalid("tasks", "must hold 1 to %d tasks, got %d", maxBatch, n)
	}
	b.params = make([]store.TaskInsertParams, len(b.Tasks))
	var refs map[string]int
	known := jsonFields(reflect.TypeFor[*submitRequest]())
	var item submitRequest // the item being checked, when decodeFast read them
	for i, raw := range b.Tasks {
		// Checked without the item's path first: building "tasks[i].…"
		// field names for every field of every item was most of what a
		// batch allocated. The checks depend on nothing else, so a
		// failing item fails again, with its path, for the error.
		var (
			p   store.TaskInsertParams
			ref string
			err error
		)
		if b.items != nil {
			item.SubmitRequest = b.items[i]
			p, ref, err = a.checkSubmit(&item, "", refs, now)
		} else {
			p, ref, err = a.checkItem(raw, known, "", refs, now)
		}
		if err != nil {
			if _, _, named := a.checkItem(raw, known, fmt.Sprintf("tasks[%d]", i), refs, now); named != nil {
				err = named
			}
			return err
		}
		if ref != "" {
			if j, dup := refs[ref]; dup {
				return rota.Invalid(fmt.Sprintf("tasks[%d].ref", i), "is %s, already the ref of tasks[%d]", shortQuote(ref), j)
			}
			if refs == nil {
				refs = map[string]int{}
			}
			refs[ref] = i
		}
		b.params[i] = p
	}
	return nil
}

// decodeFast reads a plain batch, {"tasks":[…]} whose items are each one
// quickSubmit reads, in one pass over the body: the strict way scanned it
// five times (json.Valid, quickKeys, encoding/json's scan and copy of each
// item, then each item again). Each item's bytes are kept (sub-slices of
// the body, not copies) for the strict decoder to name an item's error.
// It reports false for anything else, and the strict decoder takes the
// body from the start.
func (b *batchRequest) decodeFast(data []byte) bool {
	r := jsonwire.NewReader(data)
	bufs := batchBufs.Get().(*batchBuf)
	raws, items := bufs.raws[:0], bufs.items[:0]
	var (
		q   quickItems
		saw bool
	)
	ok := r.Object(func(key []byte) bool {
		if string(key) != "tasks" || saw || r.Peek() != '[' {
			return false
		}
		saw = true
		return r.Array(func() bool {
			if len(items) >= maxBatch || r.Peek() != '{' {
				return false
			}
			start := r.Offset()
			items = append(items, rotaapi.SubmitRequest{})
			if !q.item(r, &items[len(items)-1], true) {
				return false
			}
			raws = append(raws, data[start:r.Offset():r.Offset()])
			return true
		})
	})
	bufs.raws, bufs.items = raws, items
	if !ok || !saw || !r.End() {
		bufs.put()
		return false
	}
	b.Tasks, b.items, b.bufs = raws, items, bufs
	return true
}

// batchBuf holds the buffers decodeFast reads a batch into: at 100 tasks
// a batch, they were a tenth of what the server allocated.
type batchBuf struct {
	raws  []json.RawMessage
	items []rotaapi.SubmitRequest
}

var batchBufs = sync.Pool{New: func() any { return new(batchBuf) }}

// put clears the buffers (they must not keep a request's strings) and
// gives them back.
func (bb *batchBuf) put() {
	clear(bb.raws)
	clear(bb.items)
	bb.raws, bb.items = bb.raws[:0], bb.items[:0]
	batchBufs.Put(bb)
}

// release gives back the buffers decodeFast took, once the items are
// checked (params keep nothing of them but strings and the body's bytes).
func (b *batchRequest) release() {
	if b.bufs != nil {
		b.bufs.put()
		b.Tasks, b.items, b.bufs = nil, nil, nil
	}
}

// checkItem decodes and checks one item of a batch whose fields sit under
// the JSON path prefix; refs maps the refs of the items before it to their
// index. It returns the insert and the item's ref.
func (a *API) checkItem(raw []byte, known map[string]bool, prefix string, refs map[string]int, now time.Time) (store.TaskInsertParams, string, error) {
	var s submitRequest
	// The body was valid JSON as a whole, so each item is a valid value:
	// decodeValid spares json.Valid's scan (and decodes plain items
	// without encoding/json: submitRequest.quickDecode).
	decode := decodeValid
	if isBlank(raw) {
		decode = decodeKnown // names the item that is not an object
	}
	if err := decode(raw, &s, prefix, known); err != nil {
		return store.TaskInsertParams{}, "", err
	}
	return a.checkSubmit(&s, prefix, refs, now)
}

// checkSubmit checks one decoded item of a batch (see checkItem).
func (a *API) checkSubmit(s *submitRequest, prefix string, refs map[string]int, now time.Time) (store.TaskInsertParams, string, error) {
	p, err := s.check(a.maxPayload, prefix, now)
	if err != nil {
		return p, "", err
	}
	if err := a.checkAccepted(joinPath(prefix, "kind"), p.Kind); err != nil {
		return p, "", err
	}
	if err := s.checkDeps(prefix, refs, &p); err != nil {
		return p, "", err
	}
	if s.Ref != "" {
		if err := checkName(joinPath(prefix, "ref"), s.Ref, maxKeyLen); err != nil {
			return p, "", err
		}
		if strings.HasPrefix(s.Ref, refPrefix) {
			return p, "", rota.Invalid(joinPath(prefix, "ref"), "must not start with %q", refPrefix)
		}
	}
	return p, s.Ref, nil
}

// taskSubmitBatch stores up to 1000 tasks in one transaction: all or none.
//
// POST /api/tasks/batch
func (a *API) taskSubmitBatch(ctx context.Context, req *batchRequest) (*rotaapi.BatchSubmitResponse, error) {
	for i := range req.params {
		// The field is named only for an error (formatting it for every
		// item was a share of a batch's allocations).
		if i > 0 && req.params[i].Kind == req.params[i-1].Kind {
			continue // allowed: the item before has the same kind
		}
		if err := checkKindAllowed(ctx, "kind", req.params[i].Kind); err != nil {
			return nil, underPrefix(err, fmt.Sprintf("tasks[%d]", i))
		}
	}
	for i := range req.params {
		req.params[i].ID = a.disp.NewID()
	}
	res, err := a.disp.Submit(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("submit batch: %w", depsError(err, true))
	}
	out := &rotaapi.BatchSubmitResponse{Results: make([]rotaapi.SubmitResult, len(res))}
	for i, r := range res {
		out.Results[i] = rotaapi.SubmitResult{TaskID: r.Task.ID, Existing: r.Existing, Rerun: r.Rerun}
	}
	return out, nil
}

// listRequest holds the query of GET /api/tasks.
type listRequest struct {
	params store.TaskListParams
}

func (l *listRequest) readRequest(r *http.Request) error {
	p := &l.params
	params := append(taskFilterParams(p), pageParams(&p.Limit, &p.Cursor, nil)...)
	params = append(params, queryParam{"sort", func(v string) (err error) {
		p.Sort, err = store.ParseTaskSort(v)
		return err
	}})
	if err := readQuery(r, params...); err != nil {
		return err
	}
	return checkListCursor(p)
}

// checkListCursor checks the cursor of a task list against its sort: a
// task id with the default sort, else "<unix ms>.<task id>".
func checkListCursor(p *store.TaskListParams) error {
	switch {
	case p.Cursor == "":
		return nil
	case p.Sort.Field == "":
		return checkCursor("cursor", p.Cursor)
	}
	_, _, err := store.ParseSortCursor(p.Cursor)
	return err
}

// maxSearchLen bounds the q filter of the task list.
const maxSearchLen = 256

// taskFilterParams are the filters of GET /api/tasks and GET
// /api/tasks/counts.
func taskFilterParams(p *store.TaskListParams) []queryParam {
	return []queryParam{
		nameParam("kind", &p.Kind, checkKind),
		statusesParam(&p.Statuses),
		nameParam("key", &p.Key, func(field, v string) error { return checkName(field, v, maxKeyLen) }),
		{"priority", func(v string) error {
			if v == "" {
				return nil
			}
			pr := rota.Priority(strings.ToLower(v))
			if pr.Level() < 0 {
				return rota.Invalid("priority", "must be one of high, mid, low, got %s", shortQuote(v))
			}
			p.Priority = pr
			return nil
		}},
		nameParam("worker_id", &p.WorkerID, checkWorkerID),
		nameParam("depends_on", &p.DependsOn, checkID),
		nameParam("q", &p.Search, func(field, v string) error { return checkName(field, v, maxSearchLen) }),
		nameParam("schedule_id", &p.ScheduleID, func(field, v string) error { return checkName(field, v, maxKeyLen) }),
		timeParam("created_after", &p.CreatedAfter),
		timeParam("created_before", &p.CreatedBefore),
		timeParam("run_after", &p.RunAfter),
		timeParam("run_before", &p.RunBefore),
		timeParam("finished_after", &p.FinishedAfter),
		timeParam("finished_before", &p.FinishedBefore),
	}
}

// timeParam is an instant of a time-range filter: RFC 3339
// (2026-01-02T15:04:05Z) or unix milliseconds; "" means open.
func timeParam(name string, dst *time.Time) queryParam {
	return queryParam{name, func(v string) error {
		*dst = time.Time{}
		if v == "" {
			return nil
		}
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 && ms <= maxRunAt*1000 {
			*dst = time.UnixMilli(ms).UTC()
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1970 || t.Year() > 9999 {
			return rota.Invalid(name, "must be an RFC 3339 instant (2026-01-02T15:04:05Z) or unix milliseconds, got %s", shortQuote(v))
		}
		*dst = t.UTC()
		return nil
	}}
}

// statusesParam is the status filter of the task list: one status or
// several, comma-separated (any case); "" (or absent) means any.
func statusesParam(dst *[]rota.Status) queryParam {
	return queryParam{"status", func(v string) error {
		*dst = nil
		if v == "" {
			return nil
		}
		for _, part := range strings.Split(v, ",") {
			st, err := parseStatus("status", strings.TrimSpace(part))
			if err != nil {
				return err
			}
			if st == "" {
				return rota.Invalid("status", "has an empty status in %s", shortQuote(v))
			}
			if !slices.Contains(*dst, st) {
				*dst = append(*dst, st)
			}
		}
		return nil
	}}
}

// checkCursor checks the cursor of a list that pages by task id.
func checkCursor(name, v string) error {
	if err := checkID(name, v); err != nil {
		return rota.Invalid(name, "must be the next_cursor of a previous page (32 lowercase hex characters), got %s", shortQuote(v))
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

// taskList lists tasks newest first (or in the order of sort), one page
// at a time.
//
// GET /api/tasks?kind=&status=A,B&key=&priority=&worker_id=&q=&schedule_id=&created_after=&…&sort=&limit=&cursor=
func (a *API) taskList(ctx context.Context, req *listRequest) (*rotaapi.TaskList, error) {
	res, err := a.store.TaskList(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return &rotaapi.TaskList{Tasks: convertAll(res.Tasks, toTask), Page: rotaapi.Page{NextCursor: res.NextCursor}}, nil
}

// countsRequest holds the query of GET /api/tasks/counts.
type countsRequest struct {
	params store.TaskListParams
}

func (c *countsRequest) readRequest(r *http.Request) error {
	return readQuery(r, taskFilterParams(&c.params)...)
}

// taskCounts counts the tasks matching the task list's filters, by
// status; the status filter is ignored, so that every status's count
// shows next to the list.
//
// GET /api/tasks/counts?kind=&status=&key=&priority=&worker_id=&q=
func (a *API) taskCounts(ctx context.Context, req *countsRequest) (*rotaapi.TaskCounts, error) {
	counts, err := a.store.TaskCountByStatus(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out := &rotaapi.TaskCounts{Counts: statusCounts(counts)}
	for _, n := range counts {
		out.Total += n
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
func (a *API) taskGet(ctx context.Context, req *taskIDRequest) (*rotaapi.TaskDetail, error) {
	t, err := a.store.TaskGet(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	return toTaskDetail(t), nil
}

// taskRunAgain submits a copy of a task: same kind, priority, payload and
// options, no key, due now.
//
// POST /api/tasks/run_again/{id}
func (a *API) taskRunAgain(ctx context.Context, req *taskIDRequest) (*rotaapi.SubmitResponse, error) {
	t, err := a.store.TaskGet(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("run again: %w", err)
	}
	p := a.runAgainParams(t)
	res, err := a.disp.Submit(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return nil, fmt.Errorf("run again %s: %w", t.ID, err)
	}
	return &rotaapi.SubmitResponse{TaskID: res[0].Task.ID}, nil
}

// runAgainParams is the insert of a copy of t: same kind, priority,
// payload and options, no key, due now.
func (a *API) runAgainParams(t *rota.Task) store.TaskInsertParams {
	now := a.disp.Now()
	return store.TaskInsertParams{
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
}

// stopRequest is POST /api/tasks/stop/{id} with an optional message.
type stopRequest struct {
	taskIDRequest
	rotaapi.TaskStopRequest
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
func (a *API) taskStop(ctx context.Context, req *stopRequest) (*rotaapi.TaskDetail, error) {
	msg := ""
	if req.Message != nil {
		msg = *req.Message
	}
	t, err := a.disp.StopTask(ctx, req.id, msg)
	if err != nil {
		return nil, fmt.Errorf("stop task: %w", err)
	}
	return toTaskDetail(t), nil
}

// updateRequest is the body of PATCH /api/tasks/{id}: absent (or null)
// fields are left as they are.
type updateRequest struct {
	taskIDRequest
	rotaapi.TaskUpdateRequest

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

// changes is what a PATCH asked for, for the audit log (the task itself
// would carry its payload there).
func (u *updateRequest) changes() map[string]any {
	out := map[string]any{}
	if u.Priority != nil {
		out["priority"] = *u.Priority
	}
	if u.WorkerIDs != nil {
		out["worker_ids"] = *u.WorkerIDs
	}
	if u.HeartbeatTimeoutSeconds != nil {
		out["heartbeat_timeout_seconds"] = *u.HeartbeatTimeoutSeconds
	}
	if u.MaxRetries != nil {
		out["max_retries"] = *u.MaxRetries
	}
	return out
}

// taskUpdate changes the priority, allowed workers, heartbeat timeout or
// retry budget of an unfinished task. Narrowing worker_ids stops the runs
// of the workers no longer allowed.
//
// PATCH /api/tasks/{id}
func (a *API) taskUpdate(ctx context.Context, req *updateRequest) (*rotaapi.TaskDetail, error) {
	t, err := a.disp.Update(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("update task: %w", err)
	}
	out := toTaskDetail(t)
	noteAudit(ctx, t.ID, nil, req.changes())
	return out, nil
}
