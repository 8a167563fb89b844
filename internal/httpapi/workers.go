package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/dispatch"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// mountWorkers registers the worker protocol and the worker routes.
func (a *API) mountWorkers(mux *http.ServeMux) {
	mount(a, mux, "POST /api/workers/claim", bodyRequired, a.workerClaim)
	mount(a, mux, "GET /api/workers", bodyNone, a.workerList)
	mount(a, mux, "POST /api/workers/{id}/stop", bodyOptional, a.workerStop)
	mount(a, mux, "POST /api/workers/{id}/deregister", bodyOptional, a.workerDeregister)
	mount(a, mux, "POST /api/runs/{run_id}/heartbeat", bodyRequired, a.runHeartbeat)
	mount(a, mux, "POST /api/runs/{run_id}/succeed", bodyRequired, a.runSucceed)
	mount(a, mux, "POST /api/runs/{run_id}/fail", bodyRequired, a.runFail)
	mount(a, mux, "POST /api/runs/{run_id}/release", bodyRequired, a.runRelease)
	mount(a, mux, "POST /api/runs/reports", bodyRequired, a.runReports)
}

// claimRequest is the body of POST /api/workers/claim.
type claimRequest struct {
	rotaapi.ClaimRequest

	remote string                // the peer's IP, the default address
	claim  dispatch.ClaimRequest // set by validate
}

func (c *claimRequest) readRequest(r *http.Request) error {
	c.remote = remoteIP(r)
	return nil
}

func (c *claimRequest) validate(*API) error {
	if err := checkWorkerID("worker_id", c.WorkerID); err != nil {
		return err
	}
	kinds, err := checkKinds("kinds", c.Kinds)
	if err != nil {
		return err
	}
	c.claim = dispatch.ClaimRequest{WorkerID: c.WorkerID, Address: c.remote, Kinds: kinds, Max: 1}
	if c.Max != nil {
		if err := checkRange("max", *c.Max, 1, maxClaim); err != nil {
			return err
		}
		c.claim.Max = *c.Max
	}
	if c.WaitSeconds != nil {
		if err := checkRange("wait_seconds", *c.WaitSeconds, 0, maxWaitSeconds); err != nil {
			return err
		}
		c.claim.Wait = time.Duration(*c.WaitSeconds) * time.Second
	}
	if c.Address != nil && *c.Address != "" {
		if err := checkName("address", *c.Address, maxAddressLen); err != nil {
			return err
		}
		c.claim.Address = *c.Address
	}
	c.claim.Follow = c.Follow != nil && *c.Follow
	return nil
}

// workerClaim hands tasks to a worker, waiting up to wait_seconds for some
// (a long poll that a submit wakes at once). The wait ends early when the
// client goes away.
//
// POST /api/workers/claim
func (a *API) workerClaim(ctx context.Context, req *claimRequest) (*rotaapi.ClaimResponse, error) {
	for i, k := range req.claim.Kinds { // a confined token claims its kinds only
		if err := checkKindAllowed(ctx, fmt.Sprintf("kinds[%d]", i), k); err != nil {
			return nil, err
		}
	}
	res, err := a.disp.Claim(ctx, req.claim)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return &rotaapi.ClaimResponse{Tasks: convertAll(res.Runs, toClaimedRun), Drain: res.Drain, ServerTimeMs: a.now().UnixMilli()}, nil
}

// runRef names a run in the path.
type runRef struct {
	runID string
}

func (r *runRef) readRequest(hr *http.Request) error {
	r.runID = hr.PathValue("run_id")
	return checkID("run_id", r.runID)
}

// heartbeatRequest is POST /api/runs/{run_id}/heartbeat.
type heartbeatRequest struct {
	runRef
	rotaapi.HeartbeatRequest

	wait time.Duration // set by validate
}

func (h *heartbeatRequest) validate(*API) error {
	if err := checkWorkerID("worker_id", h.WorkerID); err != nil {
		return err
	}
	if h.WaitSeconds != nil {
		if err := checkRange("wait_seconds", *h.WaitSeconds, 0, maxWaitSeconds); err != nil {
			return err
		}
		h.wait = time.Duration(*h.WaitSeconds) * time.Second
	}
	h.Message = truncateMessage(h.Message)
	return nil
}

// runHeartbeat renews the lease of a run held by the worker; with
// wait_seconds it then holds the answer until the run or its worker is
// asked to stop, or the wait ends.
//
// POST /api/runs/{run_id}/heartbeat
func (a *API) runHeartbeat(ctx context.Context, req *heartbeatRequest) (*rotaapi.HeartbeatResponse, error) {
	if err := a.checkRunAllowed(ctx, req.runID); err != nil {
		return nil, err
	}
	res, err := a.disp.HeartbeatWait(ctx, req.runID, req.WorkerID, req.Message, req.wait)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return &rotaapi.HeartbeatResponse{Stop: res.Stop, Drain: res.Drain, LeaseExpiresAt: rotaapi.Unix(res.LeaseExpiresAt),
		HeartbeatTimeoutSeconds: res.HeartbeatTimeoutSeconds}, nil
}

// succeedRequest is POST /api/runs/{run_id}/succeed.
type succeedRequest struct {
	runRef
	rotaapi.SucceedRequest
}

func (s *succeedRequest) validate(a *API) error {
	if err := checkWorkerID("worker_id", s.WorkerID); err != nil {
		return err
	}
	if bytes.Equal(s.Result, []byte("null")) {
		s.Result = nil
	}
	if n := int64(len(s.Result)); n > a.maxPayload {
		return tooLarge("result", n, a.maxPayload)
	}
	s.Message = truncateMessage(s.Message)
	return nil
}

// failRequest is POST /api/runs/{run_id}/fail.
type failRequest struct {
	runRef
	rotaapi.FailRequest
}

func (f *failRequest) validate(*API) error {
	if err := checkWorkerID("worker_id", f.WorkerID); err != nil {
		return err
	}
	f.Message = truncateMessage(f.Message)
	return nil
}

// toReportResponse is the answer to a report on run runID that left t
// (a store.RunCompleteParams.Brief answer is enough).
func toReportResponse(t *rota.Task, runID string) *rotaapi.ReportResponse {
	out := &rotaapi.ReportResponse{TaskID: t.ID, Status: t.Status}
	for _, r := range t.Runs {
		if r.ID == runID {
			out.RunStatus = r.Status
		}
	}
	return out
}

// runSucceed reports that a run succeeded.
//
// POST /api/runs/{run_id}/succeed
func (a *API) runSucceed(ctx context.Context, req *succeedRequest) (*rotaapi.ReportResponse, error) {
	if err := a.checkRunAllowed(ctx, req.runID); err != nil {
		return nil, err
	}
	t, err := a.disp.Complete(ctx, store.RunCompleteParams{
		RunID: req.runID, WorkerID: req.WorkerID, Success: true, Message: req.Message, Result: req.Result, Brief: true,
	})
	if err != nil {
		return nil, fmt.Errorf("report success: %w", err)
	}
	return toReportResponse(t, req.runID), nil
}

// runFail reports that a run failed; with retry (the default) the task is
// retried after a backoff while it has retries left.
//
// POST /api/runs/{run_id}/fail
func (a *API) runFail(ctx context.Context, req *failRequest) (*rotaapi.ReportResponse, error) {
	if err := a.checkRunAllowed(ctx, req.runID); err != nil {
		return nil, err
	}
	retry := req.Retry == nil || *req.Retry
	t, err := a.disp.Complete(ctx, store.RunCompleteParams{
		RunID: req.runID, WorkerID: req.WorkerID, Success: false, Message: req.Message, Retry: retry, Brief: true,
	})
	if err != nil {
		return nil, fmt.Errorf("report failure: %w", err)
	}
	return toReportResponse(t, req.runID), nil
}

// releaseRequest is POST /api/runs/{run_id}/release.
type releaseRequest struct {
	runRef
	rotaapi.ReleaseRequest
}

func (r *releaseRequest) validate(*API) error {
	if err := checkWorkerID("worker_id", r.WorkerID); err != nil {
		return err
	}
	r.Message = truncateMessage(r.Message)
	return nil
}

// runRelease hands a run back unfinished (a worker stopping gracefully): the
// run ends CANCELED, nothing counts against the task and it is claimable
// again at once.
//
// POST /api/runs/{run_id}/release
func (a *API) runRelease(ctx context.Context, req *releaseRequest) (*rotaapi.ReportResponse, error) {
	if err := a.checkRunAllowed(ctx, req.runID); err != nil {
		return nil, err
	}
	t, err := a.disp.Complete(ctx, store.RunCompleteParams{
		RunID: req.runID, WorkerID: req.WorkerID, Release: true, Message: req.Message, Brief: true,
	})
	if err != nil {
		return nil, fmt.Errorf("release run: %w", err)
	}
	return toReportResponse(t, req.runID), nil
}

// reportsRequest is the body of POST /api/runs/reports: the reports of
// many runs of one worker.
type reportsRequest struct {
	rotaapi.ReportsRequest

	items  []rotaapi.ReportItem      // set by decodeFast (then Reports is nil)
	params []store.RunCompleteParams // set by validate, one per report
}

func (b *reportsRequest) bodyLimit(a *API) int64 { return a.maxBatchBody }

// validate checks the worker and every report, naming the report at fault
// (reports[3].run_id): one bad report refuses the request, nothing applied.
func (b *reportsRequest) validate(a *API) error {
	if err := checkWorkerID("worker_id", b.WorkerID); err != nil {
		return err
	}
	n := len(b.Reports)
	if b.items != nil {
		n = len(b.items)
	}
	if n == 0 || n > maxReports {
		return rota.Invalid("reports", "must hold 1 to %d reports, got %d", maxReports, n)
	}
	b.params = make([]store.RunCompleteParams, n)
	seen := make(map[string]int, n)
	var it rotaapi.ReportItem
	for i := range n {
		prefix := func() string { return fmt.Sprintf("reports[%d]", i) }
		if b.items != nil {
			it = b.items[i]
		} else {
			it = rotaapi.ReportItem{}
			if err := decodeKnown(b.Reports[i], &it, prefix(), jsonFields(reflect.TypeFor[*rotaapi.ReportItem]())); err != nil {
				return err
			}
		}
		p, err := checkReport(&it, a.maxPayload, prefix)
		if err != nil {
			return err
		}
		if j, dup := seen[it.RunID]; dup {
			return rota.Invalid(prefix()+".run_id", "run %s is already reported by reports[%d]: report a run once", it.RunID, j)
		}
		seen[it.RunID] = i
		p.WorkerID = b.WorkerID
		b.params[i] = p
	}
	return nil
}

// checkReport validates a report whose fields sit under prefix and returns
// the completion it stands for (without the worker), as the single
// endpoint of its outcome would.
func checkReport(it *rotaapi.ReportItem, maxPayload int64, prefix func() string) (store.RunCompleteParams, error) {
	f := func(name string) string { return joinPath(prefix(), name) }
	if err := checkID("run_id", it.RunID); err != nil { // the path is built for an error only
		return store.RunCompleteParams{}, underPrefix(err, prefix())
	}
	if bytes.Equal(it.Result, []byte("null")) {
		it.Result = nil
	}
	p := store.RunCompleteParams{RunID: it.RunID, Message: truncateMessage(it.Message), Brief: true}
	switch it.Outcome {
	case rotaapi.OutcomeSucceed, rotaapi.OutcomeFail, rotaapi.OutcomeRelease:
	default:
		return p, rota.Invalid(f("outcome"), `must be "succeed", "fail" or "release", got %s`, shortQuote(string(it.Outcome)))
	}
	if it.Result != nil && it.Outcome != rotaapi.OutcomeSucceed {
		return p, rota.Invalid(f("result"), "is for a succeed report, not %s", it.Outcome)
	}
	if it.Retry != nil && it.Outcome != rotaapi.OutcomeFail {
		return p, rota.Invalid(f("retry"), "is for a fail report, not %s", it.Outcome)
	}
	switch it.Outcome {
	case rotaapi.OutcomeSucceed:
		if n := int64(len(it.Result)); n > maxPayload {
			return p, tooLarge(f("result"), n, maxPayload)
		}
		p.Success, p.Result = true, it.Result
	case rotaapi.OutcomeFail:
		p.Retry = it.Retry == nil || *it.Retry
	case rotaapi.OutcomeRelease:
		p.Release = true
	}
	return p, nil
}

// runReports applies many reports of one worker, each as its single
// endpoint would (a lost lease or an unknown run fails that report only),
// concurrently, so that the store commits them together. It answers 200
// with one result per report, in order, whatever became of each.
//
// POST /api/runs/reports
func (a *API) runReports(ctx context.Context, req *reportsRequest) (*rotaapi.ReportsResponse, error) {
	ids := make([]string, len(req.params))
	for i, p := range req.params {
		ids[i] = p.RunID
	}
	forbidden, err := a.forbiddenRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	// Reports on runs of kinds the token may not touch fail alone (403);
	// the others go to the dispatcher together.
	allowed := make([]store.RunCompleteParams, 0, len(req.params))
	for _, p := range req.params {
		if forbidden[p.RunID] == nil {
			allowed = append(allowed, p)
		}
	}
	done, doneErrs := a.disp.CompleteMany(ctx, allowed)
	tasks, errs := make([]*rota.Task, len(req.params)), make([]error, len(req.params))
	for i, j := 0, 0; i < len(req.params); i++ {
		if ferr := forbidden[req.params[i].RunID]; ferr != nil {
			errs[i] = ferr
			continue
		}
		tasks[i], errs[i] = done[j], doneErrs[j]
		j++
	}
	out := &rotaapi.ReportsResponse{Results: make([]rotaapi.ReportResult, len(req.params))}
	for i, p := range req.params {
		res := &out.Results[i]
		res.RunID = p.RunID
		if err := errs[i]; err != nil {
			code, msg, field := a.clientError(ctx, http.MethodPost, "/api/runs/reports",
				fmt.Errorf("report run %s: %w", p.RunID, err))
			res.Error = &rotaapi.ReportError{Code: code.Number(), Message: msg, Field: field}
			continue
		}
		r := toReportResponse(tasks[i], p.RunID)
		res.TaskID, res.Status, res.RunStatus = r.TaskID, r.Status, r.RunStatus
	}
	return out, nil
}

// workerListRequest holds the query of GET /api/workers.
type workerListRequest struct {
	params store.WorkerListParams
}

func (l *workerListRequest) readRequest(r *http.Request) error {
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
			switch s := rota.WorkerStatus(strings.ToLower(v)); s {
			case "", rota.WorkerActive, rota.WorkerLost, rota.WorkerStopped:
				l.params.Status = s
			default:
				return rota.Invalid(name, "must be one of active, lost, stopped, got %s", shortQuote(v))
			}
		case "cursor":
			if v != "" {
				if err := checkName(name, v, maxIDLen); err != nil {
					return rota.Invalid(name, "must be the next_cursor of a previous page, got %s", shortQuote(v))
				}
			}
			l.params.Cursor = v
		case "limit":
			if l.params.Limit, err = parseLimit(name, v, l.params.Limit); err != nil {
				return err
			}
		default:
			return unknownParam(name, "status, kind, limit and cursor")
		}
	}
	return nil
}

// workerList returns one page of the workers seen, by id, with their
// liveness, optionally of one status and one kind.
//
// GET /api/workers?status=&kind=&limit=&cursor=
func (a *API) workerList(ctx context.Context, req *workerListRequest) (*rotaapi.WorkerList, error) {
	p := req.params
	p.Now = a.now()
	res, err := a.store.WorkerListPage(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	ids := make([]string, 0, len(res.Workers))
	for _, w := range res.Workers {
		if w.Running > 0 {
			ids = append(ids, w.ID)
		}
	}
	runs, err := a.store.WorkerRunsActive(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list workers' runs: %w", err)
	}
	for i := range res.Workers {
		res.Workers[i].Runs = runs[res.Workers[i].ID]
	}
	if err := a.withCapacity(ctx, res.Workers); err != nil {
		return nil, err
	}
	return &rotaapi.WorkerList{Workers: convertAll(res.Workers, toWorker), NextCursor: res.NextCursor}, nil
}

// workerIDRequest names a worker in the path.
type workerIDRequest struct {
	id string
}

func (w *workerIDRequest) readRequest(r *http.Request) error {
	w.id = r.PathValue("id")
	return checkWorkerID("id", w.id)
}

// workerStop asks a worker to drain: its claims get no more work and
// answer drain=true (a waiting claim at once), its heartbeats answer
// drain=true; once it holds no runs its status is "stopped".
//
// POST /api/workers/{id}/stop
func (a *API) workerStop(ctx context.Context, req *workerIDRequest) (*rotaapi.Worker, error) {
	w, err := a.disp.StopWorker(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("stop worker: %w", err)
	}
	out := toWorker(w)
	return &out, nil
}

// checkRunAllowed refuses (403) a report on a run whose kind the token is
// not confined to.
func (a *API) checkRunAllowed(ctx context.Context, runID string) error {
	if len(principal(ctx).Kinds) == 0 {
		return nil // any kind (forbiddenRuns would say so, at the cost of a slice)
	}
	forbidden, err := a.forbiddenRuns(ctx, []string{runID})
	if err != nil {
		return err
	}
	return forbidden[runID]
}

// forbiddenRuns returns the 403 error of each run (by id) whose kind the
// principal of ctx may not touch; nil for a principal of any kind (no
// store read then). Unknown runs are left to the report itself.
func (a *API) forbiddenRuns(ctx context.Context, runIDs []string) (map[string]error, error) {
	p := principal(ctx)
	if len(p.Kinds) == 0 {
		return nil, nil
	}
	kinds, err := a.store.RunKinds(ctx, runIDs)
	if err != nil {
		return nil, fmt.Errorf("look up the kinds of runs: %w", err)
	}
	out := make(map[string]error)
	for id, k := range kinds {
		if err := checkKindAllowed(ctx, "run_id", k); err != nil {
			out[id] = err
		}
	}
	return out, nil
}

// workerDeregister records that a worker stopped gracefully (SDK workers
// call it as they exit): once it holds no runs it lists as stopped, not
// lost, until it claims again. Unlike stop, it does not drain the worker
// id: a new process with the same id gets work.
//
// POST /api/workers/{id}/deregister
func (a *API) workerDeregister(ctx context.Context, req *workerIDRequest) (*rotaapi.Worker, error) {
	w, err := a.disp.DeregisterWorker(ctx, req.id)
	if err != nil {
		return nil, fmt.Errorf("deregister worker: %w", err)
	}
	out := toWorker(w)
	return &out, nil
}
