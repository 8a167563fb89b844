package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/netguard"
	"github.com/rotahq/rota/internal/schedule"
	"github.com/rotahq/rota/internal/schedule/firetime"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/rotaapi"
)

// Limits of the schedules API.
const (
	maxScheduleName    = 200 // name, in characters
	maxConcurrencyCap  = 10000
	maxTargetHeaders   = 50
	maxTargetURL       = 2048
	maxPreview         = 1000 // n of /next and /preview
	defaultPreview     = 10
	defaultTimeoutSecs = 10 // timeout_seconds ≤ 0
)

// mountSchedules registers the schedule routes.
//
// A change made here reaches this node's engine at once (Config.
// ScheduleChanged); the engine of another node (the leader may be another
// node) sees it at its next poll of the store (schedule.DefaultPollInterval),
// or at once when the store's Version moved under a fire it was about to
// make.
func (a *API) mountSchedules(mux *http.ServeMux) {
	mount(a, mux, "POST /api/schedules", bodyRequired, a.scheduleCreate)
	mount(a, mux, "GET /api/schedules", bodyNone, a.scheduleList)
	mount(a, mux, "POST /api/schedules/preview", bodyRequired, a.schedulePreview)
	mount(a, mux, "GET /api/schedules/{id}", bodyNone, a.scheduleGet)
	mount(a, mux, "PATCH /api/schedules/{id}", bodyRequired, a.scheduleUpdate)
	mount(a, mux, "DELETE /api/schedules/{id}", bodyOptional, a.scheduleDelete)
	mount(a, mux, "POST /api/schedules/{id}/pause", bodyOptional, a.schedulePause)
	mount(a, mux, "POST /api/schedules/{id}/resume", bodyOptional, a.scheduleResume)
	mount(a, mux, "POST /api/schedules/{id}/trigger", bodyOptional, a.scheduleTrigger)
	mount(a, mux, "POST /api/schedules/{id}/backfill", bodyRequired, a.scheduleBackfill)
	mount(a, mux, "GET /api/schedules/{id}/runs", bodyNone, a.scheduleRuns)
	mount(a, mux, "GET /api/schedules/{id}/next", bodyNone, a.scheduleNext)
}

// changed tells the engine of this node that schedule id changed.
func (a *API) changed(id string) {
	if a.schedChanged != nil {
		a.schedChanged(id)
	}
}

// --- bodies ----------------------------------------------------------------

// newSchedule is a schedule with the API's defaults.
func newSchedule() rota.Schedule {
	return rota.Schedule{
		Priority: rota.PriorityMid, Timezone: "UTC", Enabled: true, MaxConcurrency: 1,
		ConcurrencyPolicy: rota.ConcurrencySkip, OverlapAction: rota.OverlapAllow, FailureAction: rota.FailureRunNew,
		MisfirePolicy: rota.MisfireSkip, // TimeoutSeconds 0: the kind's default, as for any task
	}
}

// checkEnum reads a policy given in any case; ok is false when v is nil.
func checkEnum[T ~string](field string, v *T, valid func(T) bool, names string) (t T, ok bool, err error) {
	if v == nil {
		return "", false, nil
	}
	t = T(strings.ToUpper(string(*v)))
	if !valid(t) {
		return "", false, rota.Invalid(field, "must be one of %s, got %s", names, shortQuote(string(*v)))
	}
	return t, true, nil
}

// applySchedule checks b and applies it to s; create says whether this is
// a new schedule (required fields). A target is checked against a.guard,
// and a target header value "***" keeps the value s had.
func applySchedule(a *API, b *rotaapi.ScheduleRequest, s *rota.Schedule, create bool) error {
	if err := applyIdentity(b, s, create, a.maxPayload); err != nil {
		return err
	}
	if err := applyTimetable(b, s, create); err != nil {
		return err
	}
	if err := applyPolicies(b, s); err != nil {
		return err
	}
	if len(b.Target) > 0 {
		t, err := checkTarget(b.Target, s.Target, a.guard)
		if err != nil {
			return err
		}
		s.Target = t
	}
	return applyFailure(b, s)
}

// applyIdentity applies name, kind, task and priority.
func applyIdentity(b *rotaapi.ScheduleRequest, s *rota.Schedule, create bool, maxPayload int64) error {
	if b.Name != nil {
		if err := checkName("name", *b.Name, maxScheduleName); err != nil {
			return err
		}
		s.Name = *b.Name
	} else if create {
		return rota.Invalid("name", "is required")
	}
	if b.Kind != nil {
		if err := checkKind("kind", *b.Kind); err != nil {
			return err
		}
		s.Kind = *b.Kind
	} else if create {
		return rota.Invalid("kind", "is required")
	}
	if len(b.Task) > 0 || create {
		payload, err := checkPayload("task", b.Task, maxPayload)
		if err != nil {
			return err
		}
		s.Payload = append(json.RawMessage(nil), payload...)
	}
	if b.Priority != nil {
		p, err := checkPriority("priority", b.Priority)
		if err != nil {
			return err
		}
		s.Priority = p
	}
	return nil
}

// applyTimetable applies cron_expr or plan, timezone and enabled.
func applyTimetable(b *rotaapi.ScheduleRequest, s *rota.Schedule, create bool) error {
	if b.CronExpr != nil && b.Plan != nil {
		return rota.Invalid("cron_expr", "give cron_expr or plan, not both")
	}
	if b.CronExpr != nil {
		if *b.CronExpr == "" {
			return rota.Invalid("cron_expr", "must not be empty")
		}
		s.CronExpr, s.Plan = *b.CronExpr, nil
	}
	if b.Plan != nil {
		s.CronExpr = ""
		s.Plan = &rota.PlanSpec{Type: b.Plan.PlanType, Value: b.Plan.PlanValue, Repeat: b.Plan.PlanRepet, Time: b.Plan.PlanTime, NoKeep: b.Plan.NoKeep}
	}
	if create && s.CronExpr == "" && s.Plan == nil {
		return rota.Invalid("cron_expr", "is required (or give a plan)")
	}
	if b.Timezone != nil {
		s.Timezone = *b.Timezone
		if s.Timezone == "" {
			s.Timezone = "UTC"
		}
	}
	if b.Enabled != nil {
		s.Enabled = *b.Enabled
	}
	return nil
}

// applyPolicies applies max_concurrency, the policies, catchup_limit and
// timeout_seconds.
func applyPolicies(b *rotaapi.ScheduleRequest, s *rota.Schedule) error {
	if b.MaxConcurrency != nil {
		if err := checkRange("max_concurrency", *b.MaxConcurrency, 1, maxConcurrencyCap); err != nil {
			return err
		}
		s.MaxConcurrency = *b.MaxConcurrency
	}
	if v, ok, err := checkEnum("concurrency_policy", b.ConcurrencyPolicy, rota.ConcurrencyPolicy.Valid, "SKIP, QUEUE"); err != nil {
		return err
	} else if ok {
		s.ConcurrencyPolicy = v
	}
	if v, ok, err := checkEnum("overlap_action", b.OverlapAction, rota.OverlapAction.Valid, "ALLOW, SKIP, CANCEL_PREV, PARALLEL"); err != nil {
		return err
	} else if ok {
		s.OverlapAction = v
	}
	if v, ok, err := checkEnum("failure_action", b.FailureAction, rota.FailureAction.Valid, "RUN_NEW, SKIP, RETRY, BACKOFF, HALF_OPEN"); err != nil {
		return err
	} else if ok {
		s.FailureAction = v
	}
	if v, ok, err := checkEnum("misfire_policy", b.MisfirePolicy, rota.MisfirePolicy.Valid, "FIRE_NOW, SKIP, CATCH_UP_LIMITED"); err != nil {
		return err
	} else if ok {
		s.MisfirePolicy = v
	}
	if b.CatchupLimit != nil {
		if err := checkRange("catchup_limit", *b.CatchupLimit, 0, schedule.DefaultMaxCatchUp); err != nil {
			return err
		}
		s.CatchupLimit = *b.CatchupLimit
	}
	if s.MisfirePolicy == rota.MisfireCatchUpLimited && s.CatchupLimit < 1 {
		return rota.Invalid("catchup_limit", "must be 1 to %d with misfire_policy CATCH_UP_LIMITED", schedule.DefaultMaxCatchUp)
	}
	if b.TimeoutSeconds != nil {
		if err := checkRange("timeout_seconds", *b.TimeoutSeconds, -1<<31, maxTimeoutSeconds); err != nil {
			return err
		}
		s.TimeoutSeconds = *b.TimeoutSeconds
		if s.TimeoutSeconds <= 0 {
			s.TimeoutSeconds = defaultTimeoutSecs // ≤ 0 means 10 s
		}
	}
	return nil
}

// applyFailure checks and applies the settings of the BACKOFF and
// HALF_OPEN failure actions (0 means the default) and the jitter.
func applyFailure(b *rotaapi.ScheduleRequest, s *rota.Schedule) error {
	for _, f := range []struct {
		name string
		v    *int
		dst  *int
		max  int
	}{
		{"backoff_seconds", b.BackoffSeconds, &s.BackoffSeconds, maxTimeoutSeconds},
		{"backoff_max_seconds", b.BackoffMaxSeconds, &s.BackoffMaxSeconds, maxTimeoutSeconds},
		{"failure_threshold", b.FailureThreshold, &s.FailureThreshold, maxConcurrencyCap},
		{"cooldown_seconds", b.CooldownSeconds, &s.CooldownSeconds, maxTimeoutSeconds},
		{"jitter_seconds", b.JitterSeconds, &s.JitterSeconds, firetime.MaxJitterSeconds},
	} {
		if f.v == nil {
			continue
		}
		if err := checkRange(f.name, *f.v, 0, f.max); err != nil {
			return err
		}
		*f.dst = *f.v
	}
	if s.BackoffMaxSeconds > 0 && s.BackoffMaxSeconds < s.BackoffSeconds {
		return rota.Invalid("backoff_max_seconds", "must be at least backoff_seconds (%d)", s.BackoffSeconds)
	}
	return nil
}

// maskedValue is what the API shows for every target header value; sent
// back in a PATCH, it keeps the stored value.
const maskedValue = "***"

// checkTarget decodes and checks the target object; null removes it. A
// header value "***" is prev's value of that header (an error when prev
// has none). A URL on a refused literal address or localhost is an error
// naming target.url.
func checkTarget(raw json.RawMessage, prev *rota.Target, guard *netguard.Guard) (*rota.Target, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var tb rotaapi.Target
	if err := decodeStrict(raw, &tb, "target"); err != nil {
		return nil, err
	}
	u, err := url.Parse(tb.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(tb.URL) > maxTargetURL {
		return nil, rota.Invalid("target.url", "must be an absolute http or https URL of at most %d bytes", maxTargetURL)
	}
	if err := guard.CheckURL(tb.URL); err != nil {
		return nil, rota.Invalid("target.url", "%v", err)
	}
	method := strings.ToUpper(tb.Method)
	switch method {
	case "":
		method = http.MethodPost
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, rota.Invalid("target.method", "must be GET, POST, PUT, PATCH or DELETE, got %s", shortQuote(tb.Method))
	}
	if len(tb.Headers) > maxTargetHeaders {
		return nil, rota.Invalid("target.headers", "must have at most %d entries", maxTargetHeaders)
	}
	headers := make(map[string]string, len(tb.Headers))
	for k, v := range tb.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, rota.Invalid("target.headers", "header %s is not a valid name and value", shortQuote(k))
		}
		if v == maskedValue {
			old, ok := storedHeader(prev, k)
			if !ok {
				return nil, rota.Invalid("target.headers", "header %s is %q, which keeps a stored value, but the schedule has none for it", shortQuote(k), maskedValue)
			}
			v = old
		}
		headers[k] = v
	}
	if tb.Headers == nil {
		headers = nil
	}
	return &rota.Target{URL: tb.URL, Method: method, Headers: headers}, nil
}

// storedHeader returns t's value of header name (compared as HTTP header
// names: case-insensitively).
func storedHeader(t *rota.Target, name string) (string, bool) {
	if t == nil {
		return "", false
	}
	if v, ok := t.Headers[name]; ok {
		return v, true
	}
	for k, v := range t.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// armError maps a timetable error to an invalid-field error.
func armError(err error) error {
	var fe *firetime.FieldError
	if errors.As(err, &fe) {
		return rota.Invalid(fe.Field, "%s", strings.TrimPrefix(fe.Error(), fe.Field+": "))
	}
	return err
}

// --- handlers ------------------------------------------------------------

// createRequest is the body of POST /api/schedules.
type createRequest struct {
	rotaapi.ScheduleRequest
	sched rota.Schedule // set by validate
}

func (c *createRequest) validate(a *API) error {
	c.sched = newSchedule()
	return applySchedule(a, &c.ScheduleRequest, &c.sched, true)
}

// scheduleCreated is rotaapi.ScheduleIDResponse answered 201 Created.
type scheduleCreated struct{ rotaapi.ScheduleIDResponse }

func (*scheduleCreated) httpStatus() int { return http.StatusCreated }

// scheduleCreate stores a new schedule; it answers 201 Created. A plan
// that would never run (a past time plan without no_keep) is stored
// ended, real_repet 0, and Message says so.
//
// POST /api/schedules
func (a *API) scheduleCreate(ctx context.Context, req *createRequest) (*scheduleCreated, error) {
	got, err := a.sched.Create(ctx, req.sched)
	if err != nil {
		return nil, armError(fmt.Errorf("create schedule: %w", err))
	}
	noteAudit(ctx, got.ID, nil, new(toSchedule(got)))
	out := &scheduleCreated{rotaapi.ScheduleIDResponse{ScheduleID: got.ID}}
	if got.Ended {
		out.Message = "accepted, but the plan ended at once with real_repet 0: " + got.EndReason
	}
	return out, nil
}

// scheduleListRequest holds the query of GET /api/schedules.
type scheduleListRequest struct {
	params store.ScheduleListParams
}

func (l *scheduleListRequest) readRequest(r *http.Request) error {
	state := queryParam{"state", func(v string) error {
		switch v {
		case rota.StateActive, rota.StatePaused, rota.StateEnded, rota.StateError:
			l.params.State = v
			return nil
		}
		return rota.Invalid("state", "must be active, paused, ended or error, got %s", shortQuote(v))
	}}
	return readQuery(r, append(pageParams(&l.params.Limit, &l.params.Cursor, checkID), state)...)
}

// scheduleList lists schedules, newest first, of one state if asked.
//
// GET /api/schedules?limit=&cursor=&state=
func (a *API) scheduleList(ctx context.Context, req *scheduleListRequest) (*rotaapi.ScheduleList, error) {
	res, err := a.store.ScheduleList(ctx, req.params)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return &rotaapi.ScheduleList{Schedules: convertAll(res.Schedules, toSchedule), Page: rotaapi.Page{NextCursor: res.NextCursor}}, nil
}

// scheduleRef names a schedule in the path, by id or by name.
type scheduleRef struct {
	ref string
}

func (s *scheduleRef) readRequest(r *http.Request) error {
	s.ref = r.PathValue("id")
	if s.ref == "" {
		return rota.Invalid("id", "must be a schedule id or name")
	}
	return nil
}

// lookup finds the schedule ref names: an id, else a name.
func (a *API) lookup(ctx context.Context, ref string) (*rota.Schedule, error) {
	if rota.ValidID(ref) {
		s, err := a.store.ScheduleGet(ctx, ref)
		if err == nil || !errors.Is(err, rota.ErrNotFound) {
			return s, err
		}
	}
	s, err := a.store.ScheduleGetByName(ctx, ref)
	if errors.Is(err, rota.ErrNotFound) {
		return nil, rota.Errorf(rota.CodeNotFound, "no schedule with id or name %s", shortQuote(ref))
	}
	return s, err
}

// scheduleGet returns a schedule.
//
// GET /api/schedules/{id} (id or name)
func (a *API) scheduleGet(ctx context.Context, req *scheduleRef) (*rotaapi.Schedule, error) {
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", err)
	}
	return new(toSchedule(s)), nil
}

// edit changes the schedule ref names through the service (mod checks
// and sets fields; see schedule.Service.Edit) and audits the change.
func (a *API) edit(ctx context.Context, ref string, change func(ctx context.Context, id string) (prev, got *rota.Schedule, err error)) (*rota.Schedule, error) {
	s, err := a.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	prev, got, err := change(ctx, s.ID)
	if err != nil {
		if errors.Is(err, rota.ErrNotFound) {
			return nil, rota.Errorf(rota.CodeNotFound, "no schedule with id or name %s", shortQuote(ref))
		}
		return nil, armError(err)
	}
	noteAudit(ctx, got.ID, new(toSchedule(prev)), new(toSchedule(got)))
	return got, nil
}

// updateScheduleRequest is PATCH /api/schedules/{id}.
type updateScheduleRequest struct {
	scheduleRef
	rotaapi.ScheduleRequest
}

// scheduleUpdate changes a schedule. Nothing fires retroactively: fire
// times before the edit are never fired.
//
// PATCH /api/schedules/{id}
func (a *API) scheduleUpdate(ctx context.Context, req *updateScheduleRequest) (*rotaapi.Schedule, error) {
	s, err := a.edit(ctx, req.ref, func(ctx context.Context, id string) (*rota.Schedule, *rota.Schedule, error) {
		return a.sched.Edit(ctx, id, func(s *rota.Schedule) error { return applySchedule(a, &req.ScheduleRequest, s, false) })
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	return new(toSchedule(s)), nil
}

// scheduleDelete deletes a schedule; its held runs, and the unstarted runs
// of a schedule with a target, are canceled; its other runs are left as
// they are.
//
// DELETE /api/schedules/{id}
func (a *API) scheduleDelete(ctx context.Context, req *scheduleRef) (*rotaapi.ScheduleIDResponse, error) {
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("delete schedule: %w", err)
	}
	if err := a.sched.Delete(ctx, s.ID); err != nil {
		return nil, fmt.Errorf("delete schedule: %w", err)
	}
	noteAudit(ctx, s.ID, new(toSchedule(s)), nil)
	return &rotaapi.ScheduleIDResponse{ScheduleID: s.ID}, nil
}

// schedulePause disables a schedule: it fires nothing until resumed.
//
// POST /api/schedules/{id}/pause
func (a *API) schedulePause(ctx context.Context, req *scheduleRef) (*rotaapi.Schedule, error) {
	s, err := a.edit(ctx, req.ref, a.sched.Pause)
	if err != nil {
		return nil, fmt.Errorf("pause schedule: %w", err)
	}
	return new(toSchedule(s)), nil
}

// scheduleResume enables a schedule, and takes one in state error back
// into the queue (its error cleared: resume once the cause is fixed; the
// engine puts it back in state error if it still cannot go on). Fire
// times of the pause are not caught up: the misfire policy applies from
// the resume on.
//
// POST /api/schedules/{id}/resume
func (a *API) scheduleResume(ctx context.Context, req *scheduleRef) (*rotaapi.Schedule, error) {
	s, err := a.edit(ctx, req.ref, a.sched.Resume)
	if err != nil {
		return nil, fmt.Errorf("resume schedule: %w", err)
	}
	return new(toSchedule(s)), nil
}

// triggerRequest is POST /api/schedules/{id}/trigger: an optional body
// {"force": true} bypasses the overlap and concurrency policies.
type triggerRequest struct {
	scheduleRef
	rotaapi.TriggerRequest
}

// scheduleTrigger fires a schedule once, now, outside its series (paused
// or not). The overlap and concurrency policies apply (a skip is recorded
// as a SKIPPED run and answered with its reason) unless force.
//
// POST /api/schedules/{id}/trigger
func (a *API) scheduleTrigger(ctx context.Context, req *triggerRequest) (*rotaapi.TriggerResponse, error) {
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule: %w", err)
	}
	res, err := a.sched.Trigger(ctx, s.ID, req.Force)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule: %w", err)
	}
	r := res.Run
	out := &rotaapi.TriggerResponse{TaskID: r.TaskID, FireTime: rotaapi.Unix(r.FireTime), Status: r.Status,
		Reason: r.Reason, Held: r.Held, Message: r.Message}
	noteAudit(ctx, s.ID, nil, out)
	return out, nil
}

// backfillRequest is POST /api/schedules/{id}/backfill.
type backfillRequest struct {
	scheduleRef
	rotaapi.BackfillRequest
}

func (b *backfillRequest) validate(*API) error {
	for _, f := range []struct {
		name string
		v    *int64
	}{{"from", b.From}, {"to", b.To}} {
		if f.v == nil {
			return rota.Invalid(f.name, "is required (unix seconds)")
		}
		if *f.v < 0 || *f.v > maxRunAt {
			return rota.Invalid(f.name, "must be unix seconds, got %d", *f.v)
		}
	}
	return nil
}

// scheduleBackfill creates one run per fire time of [from, to) that has
// none yet (at most schedule.MaxBackfill), honouring the overlap and
// concurrency policies unless force.
//
// POST /api/schedules/{id}/backfill
func (a *API) scheduleBackfill(ctx context.Context, req *backfillRequest) (*rotaapi.BackfillResponse, error) {
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("backfill schedule: %w", err)
	}
	res, err := a.sched.Backfill(ctx, s.ID, time.Unix(*req.From, 0).UTC(), time.Unix(*req.To, 0).UTC(), req.Force)
	if err != nil {
		return nil, armError(fmt.Errorf("backfill schedule: %w", err))
	}
	out := &rotaapi.BackfillResponse{Queued: make([]int64, 0, len(res.Queued)), Skipped: make([]rotaapi.BackfillSkip, 0, len(res.Skipped))}
	for _, t := range res.Queued {
		out.Queued = append(out.Queued, t.Unix())
	}
	for _, sk := range res.Skipped {
		out.Skipped = append(out.Skipped, rotaapi.BackfillSkip{FireTime: sk.FireTime.Unix(), Reason: string(sk.Reason)})
	}
	noteAudit(ctx, s.ID, nil, out)
	return out, nil
}

// scheduleRunsRequest is GET /api/schedules/{id}/runs.
type scheduleRunsRequest struct {
	scheduleRef
	params store.ScheduleRunsParams
}

func (s *scheduleRunsRequest) readRequest(r *http.Request) error {
	if err := s.scheduleRef.readRequest(r); err != nil {
		return err
	}
	p := &s.params
	return readQuery(r, append([]queryParam{statusParam(&p.Status)}, pageParams(&p.Limit, &p.Cursor, nil)...)...)
}

// scheduleRuns lists a schedule's runs, newest fire first.
//
// GET /api/schedules/{id}/runs?status=&limit=&cursor=
func (a *API) scheduleRuns(ctx context.Context, req *scheduleRunsRequest) (*rotaapi.ScheduleRunList, error) {
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("schedule runs: %w", err)
	}
	p := req.params
	p.ScheduleID = s.ID
	res, err := a.store.ScheduleRuns(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("schedule runs: %w", err)
	}
	return &rotaapi.ScheduleRunList{Runs: convertAll(res.Runs, toScheduleRun), Page: rotaapi.Page{NextCursor: res.NextCursor}}, nil
}

// previewQuery reads n and from (unix seconds; default now).
func previewQuery(q url.Values, now time.Time) (int, time.Time, error) {
	n, from := defaultPreview, now
	for name, vs := range q {
		if len(vs) > 1 {
			return 0, from, rota.Invalid(name, "is given %d times", len(vs))
		}
		v := vs[0]
		switch name {
		case "n":
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > maxPreview {
				return 0, from, rota.Invalid(name, "must be an integer between 1 and %d, got %s", maxPreview, shortQuote(v))
			}
			n = k
		case "from":
			k, err := strconv.ParseInt(v, 10, 64)
			if err != nil || k < 0 || k > maxRunAt {
				return 0, from, rota.Invalid(name, "must be unix seconds, got %s", shortQuote(v))
			}
			from = time.Unix(k, 0).UTC()
		default:
			return 0, from, &rota.Error{Code: rota.CodeUnknownField, Message: fmt.Sprintf("unknown query parameter %q: known are n and from", name), Field: name}
		}
	}
	return n, from, nil
}

// nextRequest is GET /api/schedules/{id}/next.
type nextRequest struct {
	scheduleRef
	query url.Values
}

func (n *nextRequest) readRequest(r *http.Request) error {
	if err := n.scheduleRef.readRequest(r); err != nil {
		return err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return rota.Errorf(rota.CodeMalformed, "malformed query string: %v", err)
	}
	n.query = q
	return nil
}

// scheduleNext lists the next fire times of a stored schedule.
//
// GET /api/schedules/{id}/next?n=10&from=<unix s>
func (a *API) scheduleNext(ctx context.Context, req *nextRequest) (*rotaapi.FireTimes, error) {
	n, from, err := previewQuery(req.query, a.now())
	if err != nil {
		return nil, err
	}
	s, err := a.lookup(ctx, req.ref)
	if err != nil {
		return nil, fmt.Errorf("schedule next: %w", err)
	}
	ts, err := firetime.NextFires(s, from, n)
	if err != nil {
		return nil, armError(err)
	}
	return toFireTimes(s, ts), nil
}

// schedulePreview lists the fire times a schedule body would have.
//
// POST /api/schedules/preview
func (a *API) schedulePreview(ctx context.Context, req *rotaapi.SchedulePreviewRequest) (*rotaapi.FireTimes, error) {
	q := url.Values{}
	if req.N != nil {
		q.Set("n", strconv.Itoa(*req.N))
	}
	if req.From != nil {
		q.Set("from", strconv.FormatInt(*req.From, 10))
	}
	n, from, err := previewQuery(q, a.now())
	if err != nil {
		return nil, err
	}
	s := newSchedule()
	// Only the timetable matters: name, kind and task are optional here.
	b := req.ScheduleRequest
	if b.Name == nil {
		b.Name = new("preview")
	}
	if b.Kind == nil {
		b.Kind = new("preview")
	}
	if len(b.Task) == 0 {
		b.Task = json.RawMessage(`{}`)
	}
	if err := applySchedule(a, &b, &s, true); err != nil {
		return nil, err
	}
	if err := schedule.Arm(&s, nil, from); err != nil {
		return nil, armError(err)
	}
	s.PlanSeq = 0 // preview from `from`, as if received then
	ts, err := firetime.NextFires(&s, from, n)
	if err != nil {
		return nil, armError(err)
	}
	// The jitter of a schedule not created yet: its id is unknown, so its
	// name stands in (GET /api/schedules/{id}/next gives the exact run
	// times).
	s.ID = s.Name
	return toFireTimes(&s, ts), nil
}
