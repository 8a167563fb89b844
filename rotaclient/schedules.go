package rotaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// Schedules: the client side of /api/schedules. Every method that names a
// schedule takes a ref, which is its id or its name (the server resolves
// both); an unknown ref gives an error matching rota.ErrNotFound.

// ScheduleParams describes a schedule to create (CreateSchedule) or to
// preview (PreviewSchedule). Name, Kind and one of CronExpr or Plan are
// required to create; every other field left at its zero value takes the
// server's default.
type ScheduleParams struct {
	// Name is unique among schedules and may be used instead of the id.
	Name string
	// Kind is the kind of the tasks the schedule fires.
	Kind string
	// Priority of the fired tasks: high, mid or low; "" means mid.
	Priority rota.Priority
	// Payload is the value handed to each run (the API's "task" field),
	// encoded with encoding/json; a json.RawMessage is sent as is. Nil
	// sends {}.
	Payload any
	// CronExpr is a cron expression (5, 6 or 7 fields, a macro or
	// "@every d"), evaluated in Timezone. Give CronExpr or Plan.
	CronExpr string
	// Timezone is the IANA zone of CronExpr and of week and month plans;
	// "" means UTC.
	Timezone string
	// Plan is a calendar plan instead of CronExpr. All its fields are sent
	// (a zero Repeat means "once").
	Plan *rota.PlanSpec
	// Paused creates the schedule disabled ("enabled": false): it fires
	// nothing until ResumeSchedule.
	Paused bool
	// MaxConcurrency is the number of unfinished runs allowed at once; 0
	// means the server default (1).
	MaxConcurrency int
	// ConcurrencyPolicy, OverlapAction, FailureAction and MisfirePolicy
	// are the schedule's policies; "" means the server default (SKIP,
	// ALLOW, RUN_NEW and SKIP).
	ConcurrencyPolicy rota.ConcurrencyPolicy
	OverlapAction     rota.OverlapAction
	FailureAction     rota.FailureAction
	MisfirePolicy     rota.MisfirePolicy
	// CatchupLimit is the number of missed fire times kept by the misfire
	// policy CATCH_UP_LIMITED.
	CatchupLimit int
	// TimeoutSeconds limits each run; 0 means the kind's default (none),
	// as for any task.
	TimeoutSeconds int
	// Target, when set, makes Rota itself run each fire as an HTTP
	// request instead of handing it to workers.
	Target *rota.Target
	// BackoffSeconds and BackoffMaxSeconds tune FailureAction BACKOFF,
	// FailureThreshold and CooldownSeconds HALF_OPEN; 0 means the server
	// default (60, 3600, 3 and 300).
	BackoffSeconds    int
	BackoffMaxSeconds int
	FailureThreshold  int
	CooldownSeconds   int
	// JitterSeconds delays each run by a deterministic offset below it.
	JitterSeconds int
}

func toPlan(p *rota.PlanSpec) *rotaapi.Plan {
	if p == nil {
		return nil
	}
	return &rotaapi.Plan{PlanType: p.Type, PlanValue: p.Value, PlanRepet: p.Repeat, PlanTime: p.Time, NoKeep: p.NoKeep}
}

// encodeTarget encodes t as the API's target object.
func encodeTarget(t *rota.Target) (json.RawMessage, error) {
	if t == nil {
		return nil, nil
	}
	w := rotaapi.Target{URL: t.URL, Method: t.Method}
	if len(t.Headers) > 0 {
		w.Headers = t.Headers
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("rotaclient: encode target: %w", err)
	}
	return b, nil
}

// encodePayload encodes a payload for the "task" field; nil gives
// ifNil.
func encodePayload(v any, ifNil json.RawMessage) (json.RawMessage, error) {
	if v == nil {
		return ifNil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return ifNil, nil
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &rota.Error{Code: rota.CodeInvalid, Field: "task", Message: fmt.Sprintf("field %q: encode payload: %v", "task", err)}
	}
	return b, nil
}

// wire returns p as the API reads it.
func (p *ScheduleParams) wire() (rotaapi.ScheduleRequest, error) {
	payload, err := encodePayload(p.Payload, json.RawMessage("{}"))
	if err != nil {
		return rotaapi.ScheduleRequest{}, err
	}
	target, err := encodeTarget(p.Target)
	if err != nil {
		return rotaapi.ScheduleRequest{}, err
	}
	w := rotaapi.ScheduleRequest{
		Name: nonEmpty(p.Name), Kind: nonEmpty(p.Kind), Task: payload, Priority: nonEmpty(p.Priority),
		CronExpr: nonEmpty(p.CronExpr), Timezone: nonEmpty(p.Timezone), Plan: toPlan(p.Plan),
		MaxConcurrency: nonZero(p.MaxConcurrency), ConcurrencyPolicy: nonEmpty(p.ConcurrencyPolicy),
		OverlapAction: nonEmpty(p.OverlapAction), FailureAction: nonEmpty(p.FailureAction),
		MisfirePolicy: nonEmpty(p.MisfirePolicy), CatchupLimit: nonZero(p.CatchupLimit),
		TimeoutSeconds: nonZero(p.TimeoutSeconds), Target: target,
		BackoffSeconds: nonZero(p.BackoffSeconds), BackoffMaxSeconds: nonZero(p.BackoffMaxSeconds),
		FailureThreshold: nonZero(p.FailureThreshold), CooldownSeconds: nonZero(p.CooldownSeconds),
		JitterSeconds: nonZero(p.JitterSeconds),
	}
	if p.Paused {
		w.Enabled = new(false)
	}
	return w, nil
}

// CreateSchedule stores a new schedule (POST /api/schedules) and returns
// its id. Invalid parameters give a *rota.Error matching rota.ErrInvalid
// whose Field names the culprit (e.g. "cron_expr", "plan.plan_value"); a
// name already taken gives one matching rota.ErrConflict.
func (c *Client) CreateSchedule(ctx context.Context, p ScheduleParams) (string, error) {
	w, err := p.wire()
	if err != nil {
		return "", err
	}
	var out rotaapi.ScheduleIDResponse
	if err := c.Do(ctx, http.MethodPost, "/api/schedules", w, &out); err != nil {
		return "", err
	}
	return out.ScheduleID, nil
}

func (c *Client) scheduleCall(ctx context.Context, method, path string, in any) (*rota.Schedule, error) {
	var w scheduleIn
	if err := c.Do(ctx, method, path, in, &w); err != nil {
		return nil, err
	}
	s := w.schedule()
	return &s, nil
}

func schedulePath(ref string) string { return "/api/schedules/" + escape(ref) }

// GetSchedule returns a schedule, by id or name (GET /api/schedules/{id}).
// NextFire is zero when the schedule is disabled or ended, or while a plan
// waits for its run to end.
func (c *Client) GetSchedule(ctx context.Context, ref string) (*rota.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodGet, schedulePath(ref), nil)
}

// ScheduleListParams pages ListSchedules.
type ScheduleListParams struct {
	// Limit is the page size; 0 means the server's default.
	Limit int
	// Cursor continues after a previous page (its NextCursor).
	Cursor string
}

// Encode returns the query string of GET /api/schedules for p, with its
// leading "?" ("" when empty), for use with Do.
func (p ScheduleListParams) Encode() string {
	return pageQuery(url.Values{}, p.Limit, p.Cursor)
}

// SchedulePage is one page of schedules, newest first.
type SchedulePage struct {
	// Schedules are the page's schedules, newest first.
	Schedules []rota.Schedule
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

// ListSchedules returns one page of schedules (GET /api/schedules).
func (c *Client) ListSchedules(ctx context.Context, p ScheduleListParams) (*SchedulePage, error) {
	schedules, next, err := listPage(ctx, c, "/api/schedules"+p.Encode(), func(w *scheduleListIn) ([]rota.Schedule, string) {
		return convert(w.Schedules, (*scheduleIn).schedule), w.NextCursor
	})
	if err != nil {
		return nil, err
	}
	return &SchedulePage{Schedules: schedules, NextCursor: next}, nil
}

// AllSchedules iterates over every schedule, newest first, fetching pages
// of p.Limit as the loop goes (starting at p.Cursor). An error ends the
// iteration after being yielded once with a zero Schedule.
func (c *Client) AllSchedules(ctx context.Context, p ScheduleListParams) iter.Seq2[rota.Schedule, error] {
	return allPages(p.Cursor, func(cursor string) ([]rota.Schedule, string, error) {
		p.Cursor = cursor
		page, err := c.ListSchedules(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return page.Schedules, page.NextCursor, nil
	})
}

// ScheduleUpdate changes a schedule; nil fields are left as they are. A
// CronExpr replaces a plan and a Plan replaces a cron expression.
type ScheduleUpdate struct {
	Name     *string
	Kind     *string
	Priority *rota.Priority
	// Payload replaces the value handed to each run; nil leaves it.
	Payload           any
	CronExpr          *string
	Timezone          *string
	Plan              *rota.PlanSpec
	Enabled           *bool
	MaxConcurrency    *int
	ConcurrencyPolicy *rota.ConcurrencyPolicy
	OverlapAction     *rota.OverlapAction
	FailureAction     *rota.FailureAction
	MisfirePolicy     *rota.MisfirePolicy
	CatchupLimit      *int
	TimeoutSeconds    *int
	// Target sets the HTTP target; RemoveTarget removes it (the runs go to
	// workers again). Give one or neither.
	Target       *rota.Target
	RemoveTarget bool
}

// UpdateSchedule changes a schedule (PATCH /api/schedules/{id}) and
// returns it as stored. Nothing fires retroactively: fire times before
// the change are never fired.
func (c *Client) UpdateSchedule(ctx context.Context, ref string, u ScheduleUpdate) (*rota.Schedule, error) {
	payload, err := encodePayload(u.Payload, nil)
	if err != nil {
		return nil, err
	}
	w := rotaapi.ScheduleRequest{
		Name: u.Name, Kind: u.Kind, Task: payload, Priority: u.Priority, CronExpr: u.CronExpr, Timezone: u.Timezone,
		Plan: toPlan(u.Plan), Enabled: u.Enabled, MaxConcurrency: u.MaxConcurrency,
		ConcurrencyPolicy: u.ConcurrencyPolicy, OverlapAction: u.OverlapAction, FailureAction: u.FailureAction,
		MisfirePolicy: u.MisfirePolicy, CatchupLimit: u.CatchupLimit, TimeoutSeconds: u.TimeoutSeconds,
	}
	switch {
	case u.RemoveTarget && u.Target != nil:
		return nil, &rota.Error{Code: rota.CodeInvalid, Field: "target", Message: `field "target": give Target or RemoveTarget, not both`}
	case u.RemoveTarget:
		w.Target = json.RawMessage("null")
	case u.Target != nil:
		if w.Target, err = encodeTarget(u.Target); err != nil {
			return nil, err
		}
	}
	return c.scheduleCall(ctx, http.MethodPatch, schedulePath(ref), w)
}

// DeleteSchedule deletes a schedule (DELETE /api/schedules/{id}) and
// returns its id. Its queued (held) runs are canceled; its other runs are
// left as they are.
func (c *Client) DeleteSchedule(ctx context.Context, ref string) (string, error) {
	var out rotaapi.ScheduleIDResponse
	if err := c.Do(ctx, http.MethodDelete, schedulePath(ref), nil, &out); err != nil {
		return "", err
	}
	return out.ScheduleID, nil
}

// PauseSchedule disables a schedule (POST /api/schedules/{id}/pause): it
// fires nothing until resumed. Runs already started go on.
func (c *Client) PauseSchedule(ctx context.Context, ref string) (*rota.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, schedulePath(ref)+"/pause", nil)
}

// ResumeSchedule enables a schedule (POST /api/schedules/{id}/resume).
// Fire times of the pause are not caught up: the misfire policy applies
// from the resume on.
func (c *Client) ResumeSchedule(ctx context.Context, ref string) (*rota.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, schedulePath(ref)+"/resume", nil)
}

// TriggerResult is the run a manual trigger created.
type TriggerResult struct {
	// TaskID is the new run's task id.
	TaskID string
	// FireTime is the instant of the trigger, the run's fire time.
	FireTime time.Time
	// Status is SCHEDULED, or SKIPPED when a policy skipped the trigger
	// (Reason: overlap, concurrency, queue_full).
	Status rota.Status
	Reason rota.SkipReason
}

// TriggerSchedule fires a schedule once, now, outside its series, paused
// or not (POST /api/schedules/{id}/trigger). The overlap and concurrency
// policies apply: a skipped trigger is recorded as a SKIPPED run and
// reported in the result (Status, Reason), not as an error.
func (c *Client) TriggerSchedule(ctx context.Context, ref string) (TriggerResult, error) {
	return c.trigger(ctx, ref, nil)
}

// ForceTriggerSchedule is TriggerSchedule bypassing the overlap and
// concurrency policies ({"force": true}).
func (c *Client) ForceTriggerSchedule(ctx context.Context, ref string) (TriggerResult, error) {
	return c.trigger(ctx, ref, rotaapi.TriggerRequest{Force: true})
}

func (c *Client) trigger(ctx context.Context, ref string, body any) (TriggerResult, error) {
	var out triggerIn
	if err := c.Do(ctx, http.MethodPost, schedulePath(ref)+"/trigger", body, &out); err != nil {
		return TriggerResult{}, err
	}
	return TriggerResult{TaskID: out.TaskID, FireTime: out.FireTime.Time, Status: out.Status, Reason: out.Reason}, nil
}

// BackfillSkip is a fire time a backfill did not queue, and why.
type BackfillSkip struct {
	FireTime time.Time
	Reason   rota.SkipReason // a policy's skip reason, or "duplicate"
}

// BackfillResult is what a backfill did.
type BackfillResult struct {
	Queued  []time.Time
	Skipped []BackfillSkip
}

// BackfillSchedule creates one run for each fire time of the cron
// schedule in [from, to) that has none yet (POST
// /api/schedules/{id}/backfill), honouring the overlap and concurrency
// policies unless force. At most 1,000 fire times per call.
func (c *Client) BackfillSchedule(ctx context.Context, ref string, from, to time.Time, force bool) (*BackfillResult, error) {
	f, t := from.Unix(), to.Unix()
	var out rotaapi.BackfillResponse
	if err := c.Do(ctx, http.MethodPost, schedulePath(ref)+"/backfill", rotaapi.BackfillRequest{From: &f, To: &t, Force: force}, &out); err != nil {
		return nil, err
	}
	res := &BackfillResult{Queued: []time.Time{}, Skipped: []BackfillSkip{}}
	for _, q := range out.Queued {
		res.Queued = append(res.Queued, time.Unix(q, 0).UTC())
	}
	for _, sk := range out.Skipped {
		res.Skipped = append(res.Skipped, BackfillSkip{FireTime: time.Unix(sk.FireTime, 0).UTC(), Reason: rota.SkipReason(sk.Reason)})
	}
	return res, nil
}

// ScheduleRunsParams filters and pages ListScheduleRuns. Zero fields do
// not filter.
type ScheduleRunsParams struct {
	// Status keeps the runs in this status.
	Status rota.Status
	// Limit is the page size; 0 means the server's default.
	Limit int
	// Cursor continues after a previous page (its NextCursor).
	Cursor string
}

// Encode returns the query string of GET /api/schedules/{id}/runs for p,
// with its leading "?" ("" when p is empty), for use with Do.
func (p ScheduleRunsParams) Encode() string {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", string(p.Status))
	}
	return pageQuery(q, p.Limit, p.Cursor)
}

// ScheduleRunPage is one page of a schedule's runs, newest fire first.
// The runs' ScheduleID is empty: the API does not repeat it.
type ScheduleRunPage struct {
	// Runs are the page's runs, newest fire first.
	Runs []rota.ScheduleRun
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

// ListScheduleRuns returns one page of a schedule's runs, newest fire
// first (GET /api/schedules/{id}/runs).
func (c *Client) ListScheduleRuns(ctx context.Context, ref string, p ScheduleRunsParams) (*ScheduleRunPage, error) {
	runs, next, err := listPage(ctx, c, schedulePath(ref)+"/runs"+p.Encode(), func(w *scheduleRunListIn) ([]rota.ScheduleRun, string) {
		return convert(w.Runs, (*scheduleRunIn).run), w.NextCursor
	})
	if err != nil {
		return nil, err
	}
	return &ScheduleRunPage{Runs: runs, NextCursor: next}, nil
}

// AllScheduleRuns iterates over every run of a schedule that matches p,
// newest fire first, fetching pages as the loop goes. An error ends the
// iteration after being yielded once with a zero ScheduleRun.
func (c *Client) AllScheduleRuns(ctx context.Context, ref string, p ScheduleRunsParams) iter.Seq2[rota.ScheduleRun, error] {
	return allPages(p.Cursor, func(cursor string) ([]rota.ScheduleRun, string, error) {
		p.Cursor = cursor
		page, err := c.ListScheduleRuns(ctx, ref, p)
		if err != nil {
			return nil, "", err
		}
		return page.Runs, page.NextCursor, nil
	})
}

// fireTimes returns the fire times of the data of /next and /preview.
func fireTimes(f *rotaapi.FireTimes) []time.Time {
	out := make([]time.Time, len(f.FireTimes))
	for i, s := range f.FireTimes {
		out[i] = time.Unix(s, 0).UTC()
	}
	return out
}

// NextFireTimes returns up to n of a stored schedule's next fire times
// after from (GET /api/schedules/{id}/next). n ≤ 0 means the server's
// default (10); a zero from means the server's now. A plan that has ended
// has none.
func (c *Client) NextFireTimes(ctx context.Context, ref string, n int, from time.Time) ([]time.Time, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	if !from.IsZero() {
		q.Set("from", strconv.FormatInt(from.Unix(), 10))
	}
	var out rotaapi.FireTimes
	if err := c.Do(ctx, http.MethodGet, schedulePath(ref)+"/next"+encodeQuery(q), nil, &out); err != nil {
		return nil, err
	}
	return fireTimes(&out), nil
}

// PreviewSchedule returns up to n fire times the schedule p would have
// from from, without saving anything (POST /api/schedules/preview). Only
// the timetable matters: Name, Kind and Payload may be left empty. n and
// from default as in NextFireTimes.
func (c *Client) PreviewSchedule(ctx context.Context, p ScheduleParams, n int, from time.Time) ([]time.Time, error) {
	w, err := p.wire()
	if err != nil {
		return nil, err
	}
	in := rotaapi.SchedulePreviewRequest{ScheduleRequest: w}
	if n > 0 {
		in.N = &n
	}
	if sec := rotaapi.Unix(from); sec != 0 {
		in.From = &sec
	}
	var out rotaapi.FireTimes
	if err := c.Do(ctx, http.MethodPost, "/api/schedules/preview", in, &out); err != nil {
		return nil, err
	}
	return fireTimes(&out), nil
}
