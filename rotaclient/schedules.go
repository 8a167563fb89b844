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
	// TimeoutSeconds limits each run; 0 means the server default (10).
	TimeoutSeconds int
	// Target, when set, makes Rota itself run each fire as an HTTP
	// request instead of handing it to workers.
	Target *rota.Target
}

// planWire is the API's plan object.
type planWire struct {
	PlanType  string `json:"plan_type"`
	PlanValue int    `json:"plan_value"`
	PlanRepet int    `json:"plan_repet"`
	PlanTime  int64  `json:"plan_time"`
	NoKeep    bool   `json:"no_keep"`
}

func toPlanWire(p *rota.PlanSpec) *planWire {
	if p == nil {
		return nil
	}
	return &planWire{PlanType: p.Type, PlanValue: p.Value, PlanRepet: p.Repeat, PlanTime: p.Time, NoKeep: p.NoKeep}
}

// targetWire is the API's target object.
type targetWire struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

func toTargetWire(t *rota.Target) *targetWire {
	if t == nil {
		return nil
	}
	return &targetWire{URL: t.URL, Method: t.Method, Headers: t.Headers}
}

// scheduleParamsWire is ScheduleParams as the API reads it; N and From are
// only sent to the preview.
type scheduleParamsWire struct {
	Name              string          `json:"name,omitempty"`
	Kind              string          `json:"kind,omitempty"`
	Task              json.RawMessage `json:"task"`
	Priority          rota.Priority   `json:"priority,omitempty"`
	CronExpr          string          `json:"cron_expr,omitempty"`
	Timezone          string          `json:"timezone,omitempty"`
	Plan              *planWire       `json:"plan,omitempty"`
	Enabled           *bool           `json:"enabled,omitempty"`
	MaxConcurrency    int             `json:"max_concurrency,omitempty"`
	ConcurrencyPolicy string          `json:"concurrency_policy,omitempty"`
	OverlapAction     string          `json:"overlap_action,omitempty"`
	FailureAction     string          `json:"failure_action,omitempty"`
	MisfirePolicy     string          `json:"misfire_policy,omitempty"`
	CatchupLimit      int             `json:"catchup_limit,omitempty"`
	TimeoutSeconds    int             `json:"timeout_seconds,omitempty"`
	Target            *targetWire     `json:"target,omitempty"`
	N                 int             `json:"n,omitempty"`
	From              int64           `json:"from,omitempty"`
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

func (p *ScheduleParams) wire() (scheduleParamsWire, error) {
	payload, err := encodePayload(p.Payload, json.RawMessage("{}"))
	if err != nil {
		return scheduleParamsWire{}, err
	}
	w := scheduleParamsWire{
		Name: p.Name, Kind: p.Kind, Task: payload, Priority: p.Priority, CronExpr: p.CronExpr,
		Timezone: p.Timezone, Plan: toPlanWire(p.Plan), MaxConcurrency: p.MaxConcurrency,
		ConcurrencyPolicy: string(p.ConcurrencyPolicy), OverlapAction: string(p.OverlapAction),
		FailureAction: string(p.FailureAction), MisfirePolicy: string(p.MisfirePolicy),
		CatchupLimit: p.CatchupLimit, TimeoutSeconds: p.TimeoutSeconds, Target: toTargetWire(p.Target),
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
	var out struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := c.Do(ctx, http.MethodPost, "/api/schedules", w, &out); err != nil {
		return "", err
	}
	return out.ScheduleID, nil
}

// scheduleWire is a schedule as the API shows it.
type scheduleWire struct {
	ScheduleID string          `json:"schedule_id"`
	Name       string          `json:"name"`
	Kind       string          `json:"kind"`
	Priority   rota.Priority   `json:"priority"`
	Task       json.RawMessage `json:"task"`
	CronExpr   string          `json:"cron_expr"`
	Timezone   string          `json:"timezone"`
	Plan       *struct {
		planWire
		Seq       int64    `json:"seq"`
		PlanAt    unixTime `json:"plan_at"`
		RealRepet int64    `json:"real_repet"`
	} `json:"plan"`
	Enabled           bool        `json:"enabled"`
	MaxConcurrency    int         `json:"max_concurrency"`
	ConcurrencyPolicy string      `json:"concurrency_policy"`
	OverlapAction     string      `json:"overlap_action"`
	FailureAction     string      `json:"failure_action"`
	MisfirePolicy     string      `json:"misfire_policy"`
	CatchupLimit      int         `json:"catchup_limit"`
	TimeoutSeconds    int         `json:"timeout_seconds"`
	Target            *targetWire `json:"target"`
	Version           int64       `json:"version"`
	CreatedAt         unixTime    `json:"created_at"`
	UpdatedAt         unixTime    `json:"updated_at"`
	NextFireTime      unixTime    `json:"next_fire_time"`
	HighWater         unixTime    `json:"high_water"`
	LastRunID         string      `json:"last_run_id"`
	MisfireDropped    int64       `json:"misfire_dropped"`
	Ended             bool        `json:"ended"`
	EndedAt           unixTime    `json:"ended_at"`
}

func (w *scheduleWire) schedule() rota.Schedule {
	s := rota.Schedule{
		ID: w.ScheduleID, Name: w.Name, Kind: w.Kind, Priority: w.Priority, Payload: nullToNil(w.Task),
		CronExpr: w.CronExpr, Timezone: w.Timezone, Enabled: w.Enabled, MaxConcurrency: w.MaxConcurrency,
		ConcurrencyPolicy: rota.ConcurrencyPolicy(w.ConcurrencyPolicy), OverlapAction: rota.OverlapAction(w.OverlapAction),
		FailureAction: rota.FailureAction(w.FailureAction), MisfirePolicy: rota.MisfirePolicy(w.MisfirePolicy),
		CatchupLimit: w.CatchupLimit, TimeoutSeconds: w.TimeoutSeconds, Version: w.Version,
		CreatedAt: w.CreatedAt.Time, UpdatedAt: w.UpdatedAt.Time,
		ScheduleState: rota.ScheduleState{
			HighWater: w.HighWater.Time, NextFire: w.NextFireTime.Time, LastRunID: w.LastRunID,
			Ended: w.Ended, EndedAt: w.EndedAt.Time, MisfireDropped: w.MisfireDropped,
		},
	}
	if p := w.Plan; p != nil {
		s.Plan = &rota.PlanSpec{Type: p.PlanType, Value: p.PlanValue, Repeat: p.PlanRepet, Time: p.PlanTime, NoKeep: p.NoKeep}
		s.PlanSeq, s.PlanAt, s.RealRepet = p.Seq, p.PlanAt.Time, p.RealRepet
	}
	if t := w.Target; t != nil {
		s.Target = &rota.Target{URL: t.URL, Method: t.Method, Headers: t.Headers}
	}
	return s
}

func (c *Client) scheduleCall(ctx context.Context, method, path string, in any) (*rota.Schedule, error) {
	var w scheduleWire
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
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return encodeQuery(q)
}

func encodeQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
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
	var out struct {
		Schedules  []scheduleWire `json:"schedules"`
		NextCursor string         `json:"next_cursor"`
	}
	if err := c.Do(ctx, http.MethodGet, "/api/schedules"+p.Encode(), nil, &out); err != nil {
		return nil, err
	}
	page := &SchedulePage{Schedules: make([]rota.Schedule, len(out.Schedules)), NextCursor: out.NextCursor}
	for i := range out.Schedules {
		page.Schedules[i] = out.Schedules[i].schedule()
	}
	return page, nil
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

// scheduleUpdateWire is ScheduleUpdate as the API reads it.
type scheduleUpdateWire struct {
	Name              *string                 `json:"name,omitempty"`
	Kind              *string                 `json:"kind,omitempty"`
	Task              json.RawMessage         `json:"task,omitempty"`
	Priority          *rota.Priority          `json:"priority,omitempty"`
	CronExpr          *string                 `json:"cron_expr,omitempty"`
	Timezone          *string                 `json:"timezone,omitempty"`
	Plan              *planWire               `json:"plan,omitempty"`
	Enabled           *bool                   `json:"enabled,omitempty"`
	MaxConcurrency    *int                    `json:"max_concurrency,omitempty"`
	ConcurrencyPolicy *rota.ConcurrencyPolicy `json:"concurrency_policy,omitempty"`
	OverlapAction     *rota.OverlapAction     `json:"overlap_action,omitempty"`
	FailureAction     *rota.FailureAction     `json:"failure_action,omitempty"`
	MisfirePolicy     *rota.MisfirePolicy     `json:"misfire_policy,omitempty"`
	CatchupLimit      *int                    `json:"catchup_limit,omitempty"`
	TimeoutSeconds    *int                    `json:"timeout_seconds,omitempty"`
	Target            json.RawMessage         `json:"target,omitempty"`
}

// UpdateSchedule changes a schedule (PATCH /api/schedules/{id}) and
// returns it as stored. Nothing fires retroactively: fire times before
// the change are never fired.
func (c *Client) UpdateSchedule(ctx context.Context, ref string, u ScheduleUpdate) (*rota.Schedule, error) {
	payload, err := encodePayload(u.Payload, nil)
	if err != nil {
		return nil, err
	}
	w := scheduleUpdateWire{
		Name: u.Name, Kind: u.Kind, Task: payload, Priority: u.Priority, CronExpr: u.CronExpr, Timezone: u.Timezone,
		Plan: toPlanWire(u.Plan), Enabled: u.Enabled, MaxConcurrency: u.MaxConcurrency,
		ConcurrencyPolicy: u.ConcurrencyPolicy, OverlapAction: u.OverlapAction, FailureAction: u.FailureAction,
		MisfirePolicy: u.MisfirePolicy, CatchupLimit: u.CatchupLimit, TimeoutSeconds: u.TimeoutSeconds,
	}
	switch {
	case u.RemoveTarget && u.Target != nil:
		return nil, &rota.Error{Code: rota.CodeInvalid, Field: "target", Message: `field "target": give Target or RemoveTarget, not both`}
	case u.RemoveTarget:
		w.Target = json.RawMessage("null")
	case u.Target != nil:
		if w.Target, err = json.Marshal(toTargetWire(u.Target)); err != nil {
			return nil, err
		}
	}
	return c.scheduleCall(ctx, http.MethodPatch, schedulePath(ref), w)
}

// DeleteSchedule deletes a schedule (DELETE /api/schedules/{id}) and
// returns its id. Its queued (held) runs are canceled; its other runs are
// left as they are.
func (c *Client) DeleteSchedule(ctx context.Context, ref string) (string, error) {
	var out struct {
		ScheduleID string `json:"schedule_id"`
	}
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
}

// TriggerSchedule fires a schedule once, now, outside its series and its
// policies, paused or not (POST /api/schedules/{id}/trigger).
func (c *Client) TriggerSchedule(ctx context.Context, ref string) (TriggerResult, error) {
	var out struct {
		TaskID   string   `json:"task_id"`
		FireTime unixTime `json:"fire_time"`
	}
	if err := c.Do(ctx, http.MethodPost, schedulePath(ref)+"/trigger", nil, &out); err != nil {
		return TriggerResult{}, err
	}
	return TriggerResult{TaskID: out.TaskID, FireTime: out.FireTime.Time}, nil
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
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return encodeQuery(q)
}

// ScheduleRunPage is one page of a schedule's runs, newest fire first.
// The runs' ScheduleID is empty: the API does not repeat it.
type ScheduleRunPage struct {
	// Runs are the page's runs, newest fire first.
	Runs []rota.ScheduleRun
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

type scheduleRunWire struct {
	TaskID    string      `json:"task_id"`
	FireTime  unixTime    `json:"fire_time"`
	Attempt   int         `json:"attempt"`
	Status    rota.Status `json:"status"`
	Reason    string      `json:"reason"`
	Triggered bool        `json:"triggered"`
	Held      bool        `json:"held"`
	CreatedAt unixTime    `json:"created_at"`
	StartTime unixTime    `json:"start_time"`
	EndTime   unixTime    `json:"end_time"`
	Message   string      `json:"message"`
}

func (w *scheduleRunWire) run() rota.ScheduleRun {
	return rota.ScheduleRun{
		TaskID: w.TaskID, FireTime: w.FireTime.Time, Attempt: w.Attempt, Status: w.Status,
		Reason: rota.SkipReason(w.Reason), Triggered: w.Triggered, Held: w.Held, CreatedAt: w.CreatedAt.Time,
		StartTime: w.StartTime.Time, EndTime: w.EndTime.Time, Message: w.Message,
	}
}

// ListScheduleRuns returns one page of a schedule's runs, newest fire
// first (GET /api/schedules/{id}/runs).
func (c *Client) ListScheduleRuns(ctx context.Context, ref string, p ScheduleRunsParams) (*ScheduleRunPage, error) {
	var out struct {
		Runs       []scheduleRunWire `json:"runs"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.Do(ctx, http.MethodGet, schedulePath(ref)+"/runs"+p.Encode(), nil, &out); err != nil {
		return nil, err
	}
	page := &ScheduleRunPage{Runs: make([]rota.ScheduleRun, len(out.Runs)), NextCursor: out.NextCursor}
	for i := range out.Runs {
		page.Runs[i] = out.Runs[i].run()
	}
	return page, nil
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

// fireTimes decodes the data of /next and /preview.
type fireTimes struct {
	FireTimes []int64 `json:"fire_times"`
}

func (f *fireTimes) times() []time.Time {
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
	var out fireTimes
	if err := c.Do(ctx, http.MethodGet, schedulePath(ref)+"/next"+encodeQuery(q), nil, &out); err != nil {
		return nil, err
	}
	return out.times(), nil
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
	w.N, w.From = max(n, 0), unixSeconds(from)
	var out fireTimes
	if err := c.Do(ctx, http.MethodPost, "/api/schedules/preview", w, &out); err != nil {
		return nil, err
	}
	return out.times(), nil
}
