package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Bulk actions (POST /api/tasks/bulk): the tasks are chosen when the job
// starts (the ids given, or those matching the filter then: at most
// store.MaxBulkTasks), then acted on in batches of store.BulkBatch in a
// goroutine of the node that took the request. Jobs live in that node's
// memory (the most recent maxBulkJobs): GET /api/tasks/bulk/{id} answers
// on that node only (404 elsewhere, with the reason). The request itself
// is audited once, with the count.

// Bounds of the bulk jobs of one node.
const (
	maxBulkJobs    = 100 // jobs remembered (finished ones are forgotten first)
	maxBulkRunning = 4   // jobs running at once
	bulkParallel   = 8   // stops in flight at once within a batch
)

// bulkActions are the actions of POST /api/tasks/bulk.
var bulkActions = []string{"run_again", "stop", "delete"}

// bulkJobs holds the bulk jobs of this node.
type bulkJobs struct {
	mu   sync.Mutex
	jobs map[string]*bulkJob
}

// bulkJob is one job; its state is guarded by bulkJobs.mu.
type bulkJob struct {
	state   rotaapi.BulkJob
	ids     []string // immutable after start
	message string   // stop's message
}

// mountBulk registers the bulk routes.
func (a *API) mountBulk(mux *http.ServeMux) {
	mount(a, mux, "POST /api/tasks/bulk", bodyRequired, a.bulkStart)
	mount(a, mux, "GET /api/tasks/bulk/{id}", bodyNone, a.bulkGet)
}

// bulkRequest is the body of POST /api/tasks/bulk.
type bulkRequest struct {
	rotaapi.BulkRequest

	filter *store.TaskListParams // set by validate when Filter is given
}

func (b *bulkRequest) validate(*API) error {
	if !slices.Contains(bulkActions, b.Action) {
		return rota.Invalid("action", "must be one of run_again, stop, delete; got %s", shortQuote(b.Action))
	}
	if b.Message != nil {
		if b.Action != "stop" {
			return rota.Invalid("message", "is only for the stop action")
		}
		*b.Message = truncateMessage(*b.Message)
	}
	switch {
	case b.Filter != nil && b.TaskIDs != nil:
		return rota.Invalid("task_ids", "give filter or task_ids, not both")
	case b.Filter != nil:
		return b.checkFilter()
	case len(b.TaskIDs) == 0:
		return rota.Invalid("task_ids", "give filter (the parameters of GET /api/tasks) or 1 to %d task ids", store.MaxBulkTasks)
	case len(b.TaskIDs) > store.MaxBulkTasks:
		return rota.Invalid("task_ids", "names %d tasks, at most %d allowed", len(b.TaskIDs), store.MaxBulkTasks)
	}
	seen := make(map[string]bool, len(b.TaskIDs))
	ids := b.TaskIDs[:0:0]
	for i, id := range b.TaskIDs {
		if err := checkID(fmt.Sprintf("task_ids[%d]", i), id); err != nil {
			return err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	b.TaskIDs = ids
	return nil
}

// checkFilter reads the filter with the task list's parameter readers,
// naming the field as filter.NAME.
func (b *bulkRequest) checkFilter() error {
	p := &store.TaskListParams{}
	params := taskFilterParams(p)
	names := make([]string, 0, len(b.Filter))
	for name := range b.Filter {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		i := slices.IndexFunc(params, func(q queryParam) bool { return q.name == name })
		if i < 0 {
			known := make([]string, len(params))
			for j, q := range params {
				known[j] = q.name
			}
			return unknownParam("filter."+name, joinAnd(known))
		}
		if err := params[i].read(b.Filter[name]); err != nil {
			var re *rota.Error
			if errors.As(err, &re) && re.Field != "" {
				return &rota.Error{Code: re.Code, Field: "filter." + re.Field, Message: re.Message}
			}
			return err
		}
	}
	b.filter = p
	return nil
}

// bulkStart chooses the tasks of a bulk job and starts it.
//
// POST /api/tasks/bulk
func (a *API) bulkStart(ctx context.Context, req *bulkRequest) (*bulkStarted, error) {
	ids := req.TaskIDs
	if req.filter != nil {
		var err error
		if ids, err = a.bulkMatch(ctx, *req.filter); err != nil {
			return nil, err
		}
	}
	job := &bulkJob{ids: ids, state: rotaapi.BulkJob{
		ID: a.disp.NewID(), Action: req.Action, Total: len(ids), Status: "running",
		CreatedAt: rotaapi.Unix(a.now()), Node: a.nodeID,
	}}
	if req.Message != nil {
		job.message = *req.Message
	}
	if err := a.bulk.add(job); err != nil {
		return nil, err
	}
	noteAudit(ctx, job.state.ID, nil, map[string]any{"action": req.Action, "total": len(ids), "filter": req.Filter})
	go a.bulkRun(context.WithoutCancel(ctx), job)
	return &bulkStarted{a.bulk.get(job.state.ID)}, nil
}

// bulkStarted answers 202: the job runs on.
type bulkStarted struct{ rotaapi.BulkJob }

func (*bulkStarted) httpStatus() int { return http.StatusAccepted }

// bulkMatch returns the ids of the tasks matching p, refusing a filter
// that matches more than store.MaxBulkTasks.
func (a *API) bulkMatch(ctx context.Context, p store.TaskListParams) ([]string, error) {
	p.Limit = maxListLimit
	var ids []string
	for {
		res, err := a.store.TaskList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("bulk: list tasks: %w", err)
		}
		for _, t := range res.Tasks {
			ids = append(ids, t.ID)
		}
		if len(ids) > store.MaxBulkTasks {
			return nil, rota.Invalid("filter", "matches more than %d tasks, the most one bulk action takes: narrow it", store.MaxBulkTasks)
		}
		if res.NextCursor == "" {
			return ids, nil
		}
		p.Cursor = res.NextCursor
	}
}

// add registers a new job, forgetting the oldest finished ones beyond
// maxBulkJobs; too many running jobs → 409.
func (b *bulkJobs) add(job *bulkJob) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.jobs == nil {
		b.jobs = map[string]*bulkJob{}
	}
	var finished []*bulkJob
	running := 0
	for _, j := range b.jobs {
		if j.state.Status == "running" {
			running++
		} else {
			finished = append(finished, j)
		}
	}
	if running >= maxBulkRunning {
		return rota.Errorf(rota.CodeConflict, "%d bulk jobs are running on this node, the most at once: wait for one to end", running)
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].state.ID < finished[j].state.ID })
	for i := 0; len(b.jobs) >= maxBulkJobs && i < len(finished); i++ {
		delete(b.jobs, finished[i].state.ID)
	}
	b.jobs[job.state.ID] = job
	return nil
}

// get returns a copy of a job's state (the zero value when unknown).
func (b *bulkJobs) get(id string) rotaapi.BulkJob {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.jobs[id]; j != nil {
		return j.state
	}
	return rotaapi.BulkJob{}
}

// update changes a job's state under the lock.
func (b *bulkJobs) update(job *bulkJob, fn func(s *rotaapi.BulkJob)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(&job.state)
}

// tally counts one task's outcome: nil done, a conflict or a missing task
// skipped, anything else failed (the first message kept).
func (b *bulkJobs) tally(job *bulkJob, err error) {
	b.update(job, func(s *rotaapi.BulkJob) {
		switch {
		case err == nil:
			s.Done++
		case errors.Is(err, rota.ErrConflict) || errors.Is(err, rota.ErrNotFound):
			s.Skipped++
		default:
			s.Failed++
			if s.Error == "" {
				s.Error = err.Error()
			}
		}
	})
}

// bulkRun acts on the job's tasks, batch by batch, and marks it done.
func (a *API) bulkRun(ctx context.Context, job *bulkJob) {
	for start := 0; start < len(job.ids); start += store.BulkBatch {
		batch := job.ids[start:min(start+store.BulkBatch, len(job.ids))]
		switch job.state.Action {
		case "stop":
			a.bulkStop(ctx, job, batch)
		case "delete":
			a.bulkDelete(ctx, job, batch)
		default:
			a.bulkRunAgain(ctx, job, batch)
		}
		if start+store.BulkBatch < len(job.ids) {
			a.bulkEvent(rota.EventBulkProgress, a.bulk.get(job.state.ID))
		}
	}
	a.bulk.update(job, func(s *rotaapi.BulkJob) {
		s.Status, s.FinishedAt = "done", rotaapi.Unix(a.now())
	})
	st := a.bulk.get(job.state.ID)
	a.bulkEvent(rota.EventBulkDone, st)
	a.log.Info("bulk job done", "id", st.ID, "action", st.Action, "total", st.Total, "done", st.Done, "failed", st.Failed)
}

// bulkEvent publishes a job's state to the cluster's event log: Result is
// the job, Message a summary.
func (a *API) bulkEvent(typ rota.EventType, st rotaapi.BulkJob) {
	ev := rota.Event{Time: a.now(), Type: typ, Message: fmt.Sprintf("%s: %d of %d handled (%d done, %d skipped, %d failed)",
		st.Action, st.Done+st.Skipped+st.Failed, st.Total, st.Done, st.Skipped, st.Failed)}
	if b, err := json.Marshal(st); err == nil {
		ev.SetResult(b)
	}
	a.events(ev)
}

// bulkStop stops each task of batch, bulkParallel at a time (the store
// groups their commits).
func (a *API) bulkStop(ctx context.Context, job *bulkJob, batch []string) {
	sem := make(chan struct{}, bulkParallel)
	var wg sync.WaitGroup
	for _, id := range batch {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := a.disp.StopTask(ctx, id, job.message)
			a.bulk.tally(job, err)
		}()
	}
	wg.Wait()
}

// bulkDelete deletes the finished tasks of batch in one write.
func (a *API) bulkDelete(ctx context.Context, job *bulkJob, batch []string) {
	n, err := a.store.TaskDeleteFinished(ctx, batch)
	a.bulk.settle(job, len(batch), n, err)
}

// settle counts n tasks handled in one write: done of them acted on, the
// rest skipped; or, when err is set, all n failed.
func (b *bulkJobs) settle(job *bulkJob, n, done int, err error) {
	b.update(job, func(s *rotaapi.BulkJob) {
		if err != nil {
			s.Failed += n
			if s.Error == "" {
				s.Error = err.Error()
			}
			return
		}
		s.Done += done
		s.Skipped += n - done
	})
}

// bulkRunAgain submits a copy of each task of batch in one transaction.
func (a *API) bulkRunAgain(ctx context.Context, job *bulkJob, batch []string) {
	ps := make([]store.TaskInsertParams, 0, len(batch))
	for _, id := range batch {
		t, err := a.store.TaskGet(ctx, id)
		if err != nil {
			a.bulk.tally(job, err)
			continue
		}
		ps = append(ps, a.runAgainParams(t))
	}
	if len(ps) == 0 {
		return
	}
	_, err := a.disp.Submit(ctx, ps)
	a.bulk.settle(job, len(ps), len(ps), err)
}

// bulkGet returns a bulk job's progress.
//
// GET /api/tasks/bulk/{id}
// (The job's id is read like a task's: {id}, 32 hex characters.)
func (a *API) bulkGet(_ context.Context, req *taskIDRequest) (*rotaapi.BulkJob, error) {
	s := a.bulk.get(req.id)
	if s.ID == "" {
		return nil, rota.Errorf(rota.CodeNotFound, "bulk job %s not found on this node: jobs are kept by the node that runs them (its id is the job's node), the last %d", req.id, maxBulkJobs)
	}
	return &s, nil
}
