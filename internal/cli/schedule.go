package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func newScheduleCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Create, list, inspect, pause, resume, trigger and delete schedules",
		Long: `Create, list, inspect, pause, resume, trigger and delete schedules on a Rota server
(--server or ROTA_SERVER). A schedule fires tasks of its kind on a cron expression or a
calendar plan; every fire is a run: a task that workers (or Rota's HTTP executor) run.

SCHEDULE is a schedule's id or its name.

Exit codes: 0 ok, 1 error, 2 bad usage or input rejected by the server,
3 no such schedule, 4 conflict (e.g. the name is taken).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newScheduleCreateCmd(env), newScheduleListCmd(env), newScheduleGetCmd(env),
		newSchedulePauseCmd(env, true), newSchedulePauseCmd(env, false), newScheduleTriggerCmd(env),
		newScheduleDeleteCmd(env), newScheduleRunsCmd(env), newScheduleNextCmd(env))
	return cmd
}

// scheduleFields maps the fields of a schedule body to the flags of
// schedule create.
func scheduleFields() map[string]string {
	return map[string]string{
		"name": "name", "kind": "kind", "task": "payload", "priority": "priority",
		"cron_expr": "cron", "timezone": "timezone",
		"plan": "plan-type", "plan.plan_type": "plan-type", "plan.plan_value": "plan-value",
		"plan.plan_repet": "plan-repeat", "plan.plan_time": "plan-time", "plan.no_keep": "no-keep",
		"enabled": "enabled", "max_concurrency": "max-concurrency", "concurrency_policy": "concurrency-policy",
		"overlap_action": "overlap", "failure_action": "failure", "misfire_policy": "misfire",
		"catchup_limit": "catchup-limit", "timeout_seconds": "timeout", "backoff_seconds": "backoff",
		"backoff_max_seconds": "backoff-max", "failure_threshold": "failure-threshold", "cooldown_seconds": "cooldown",
		"jitter_seconds": "jitter",
		"target":         "target-url", "target.url": "target-url", "target.method": "target-method", "target.headers": "target-header",
	}
}

func newScheduleCreateCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: scheduleFields()}
	sf := &scheduleFlags{}
	var file string
	cmd := &cobra.Command{
		Use:   "create --name NAME --kind KIND (--cron EXPR | --plan-type TYPE …) [flags] | --file SPEC",
		Short: "Create a schedule",
		Long: `Create a schedule and print its id.

The timetable is a cron expression or a calendar plan:
  --cron EXPR           5 fields (minute first), 6 (seconds first) or 7 (with a year);
                        L, W, #; @daily…@hourly; "@every 90s". Evaluated in --timezone.
  --plan-type TYPE      none (once, now), time (once, at --plan-time), second, minute,
                        hour, day (every --plan-value units, from --plan-time or now),
                        week (--plan-value 0-6, Sunday 0) or month (--plan-value day
                        1..31, 0 the last, -k the last minus k), at the time of day of
                        --plan-time in --timezone; --plan-repeat runs in all (-1 forever).

Each run is a task of --kind with the payload of --payload or --payload-file (- reads
standard input; {} when neither is given). With --target-url, Rota itself makes the
run an HTTP request (the payload is the body) instead of handing it to workers.

--file SPEC (- for standard input) sends a JSON schedule body of the API as it is
(see docs/api.md, "Schedules"), instead of the flags.`,
		Example: `  rota schedule create --name nightly-report --kind report --cron '0 2 * * *' --timezone Europe/Paris
  rota schedule create --name weekly --kind email --payload '{"to":"team"}' \
      --plan-type week --plan-value 1 --plan-time 09:00 --timezone America/New_York
  rota schedule create --name ping --kind http --cron '@every 30s' --overlap SKIP \
      --target-url https://example.com/hook --target-header 'Authorization=Bearer T'
  rota schedule create --file spec.json -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			if file != "" {
				if err := onlyFileFlag(cmd.Flags()); err != nil {
					return err
				}
				body, err := readJSONArg(env.Stdin, "--file", file)
				if err != nil {
					return err
				}
				o.fields = nil // the server's field paths are those of the file
				return o.createSchedule(cmd.Context(), body)
			}
			p, err := sf.params(cmd.Flags(), env.Stdin)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			id, err := c.CreateSchedule(cmd.Context(), p)
			if err != nil {
				return o.fail(err)
			}
			if o.json() {
				b, _ := json.Marshal(map[string]string{"schedule_id": id})
				return writeJSON(env.Stdout, b)
			}
			_, err = fmt.Fprintln(env.Stdout, id)
			return err
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&file, "file", "", "create from this JSON schedule body of the API instead of the flags (- for standard input)")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

// onlyFileFlag refuses schedule flags given with --file.
func onlyFileFlag(fs *pflag.FlagSet) error {
	var others []string
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "file", "server", "token", "output":
		default:
			others = append(others, "--"+f.Name)
		}
	})
	if len(others) > 0 {
		return usageError("give --file or the schedule flags (%s), not both", strings.Join(others, ", "))
	}
	return nil
}

// scheduleFlags are the flags of rota schedule create that make a
// schedule.
type scheduleFlags struct {
	p                     rotaclient.ScheduleParams
	priority              string
	payload, payloadFile  string
	planType, planTime    string
	planValue, planRepeat int
	noKeep, enabled       bool
	concurrency, overlap  string
	failure, misfire      string
	targetURL, targetVerb string
	targetHeaders         []string
}

// register defines the flags on f.
func (sf *scheduleFlags) register(f *pflag.FlagSet) {
	p := &sf.p
	f.StringVar(&p.Name, "name", "", "unique name of the schedule (required); commands take it instead of the id")
	f.StringVar(&p.Kind, "kind", "", "kind of the tasks it fires (required)")
	f.StringVar(&sf.priority, "priority", "mid", "priority of its tasks: high, mid or low")
	f.StringVar(&sf.payload, "payload", "", "the JSON payload of every run")
	f.StringVar(&sf.payloadFile, "payload-file", "", "read the JSON payload from this file (- for standard input)")
	f.StringVar(&p.CronExpr, "cron", "", "cron expression, e.g. '0 9 * * 1-5', '*/10 * * * * *', @daily, '@every 90s', 'H H(0-5) * * *'")
	f.StringVar(&p.Timezone, "timezone", "", "IANA time zone of --cron and of week and month plans (default UTC)")
	f.StringVar(&sf.planType, "plan-type", "", "calendar plan instead of --cron: none, time, second, minute, hour, day, week or month")
	f.IntVar(&sf.planValue, "plan-value", 0, "the plan's interval, weekday (0-6, Sunday 0) or day of the month (0 the last)")
	f.IntVar(&sf.planRepeat, "plan-repeat", -1, "runs of the plan in all: -1 forever, N times")
	f.StringVar(&sf.planTime, "plan-time", "", "the plan's time: RFC 3339, unix seconds, or HH:MM[:SS] in --timezone (week, month)")
	f.BoolVar(&sf.noKeep, "no-keep", false, "plan: run late occurrences instead of skipping them, and count intervals from the end of each run")
	f.BoolVar(&sf.enabled, "enabled", true, "--enabled=false creates the schedule paused")
	f.IntVar(&p.MaxConcurrency, "max-concurrency", 0, "unfinished runs allowed at once (server default 1)")
	f.StringVar(&sf.concurrency, "concurrency-policy", "", "when max-concurrency runs are unfinished: SKIP (default) or QUEUE")
	f.StringVar(&sf.overlap, "overlap", "", "when the previous run is unfinished: ALLOW (default), SKIP, CANCEL_PREV or PARALLEL")
	f.StringVar(&sf.failure, "failure", "", "when the previous run failed: RUN_NEW (default), SKIP, RETRY, BACKOFF or HALF_OPEN")
	f.Var(secondsValue{&p.BackoffSeconds}, "backoff", "--failure BACKOFF: first wait after a failure, doubling (server default 60s)")
	f.Var(secondsValue{&p.BackoffMaxSeconds}, "backoff-max", "--failure BACKOFF: longest wait (server default 1h)")
	f.IntVar(&p.FailureThreshold, "failure-threshold", 0, "--failure HALF_OPEN: failures in a row that open the circuit (server default 3)")
	f.Var(secondsValue{&p.CooldownSeconds}, "cooldown", "--failure HALF_OPEN: how long the circuit stays open (server default 5m)")
	f.Var(secondsValue{&p.JitterSeconds}, "jitter", "delay each run by a fixed pseudo-random offset below this")
	f.StringVar(&sf.misfire, "misfire", "", "fire times missed while no server ran: SKIP (default), FIRE_NOW or CATCH_UP_LIMITED")
	f.IntVar(&p.CatchupLimit, "catchup-limit", 0, "fire times caught up by --misfire CATCH_UP_LIMITED")
	f.Var(secondsValue{&p.TimeoutSeconds}, "timeout", "time limit of each run (default: the kind's, none, as for any task)")
	f.StringVar(&sf.targetURL, "target-url", "", "Rota itself calls this http(s) URL for each run, with the payload as body")
	f.StringVar(&sf.targetVerb, "target-method", "", "method of the target request: POST (default), GET, PUT, PATCH or DELETE")
	f.StringArrayVar(&sf.targetHeaders, "target-header", nil, "header NAME=VALUE of the target request (repeatable)")
}

// params checks the flags and returns the schedule they make.
func (sf *scheduleFlags) params(fs *pflag.FlagSet, stdin io.Reader) (rotaclient.ScheduleParams, error) {
	p := sf.p
	if p.Name == "" {
		return p, usageError("--name is required")
	}
	if p.Kind == "" {
		return p, usageError("--kind is required")
	}
	plan, err := sf.plan(fs)
	if err != nil {
		return p, err
	}
	p.Plan = plan
	p.Priority = rota.Priority(strings.ToLower(sf.priority))
	raw, err := readPayload(stdin, sf.payload, sf.payloadFile, fs.Changed("payload"))
	if err != nil {
		return p, err
	}
	p.Payload = raw
	p.Paused = !sf.enabled
	p.ConcurrencyPolicy = rota.ConcurrencyPolicy(strings.ToUpper(sf.concurrency))
	p.OverlapAction = rota.OverlapAction(strings.ToUpper(sf.overlap))
	p.FailureAction = rota.FailureAction(strings.ToUpper(sf.failure))
	p.MisfirePolicy = rota.MisfirePolicy(strings.ToUpper(sf.misfire))
	p.Target, err = sf.target()
	return p, err
}

// plan returns the calendar plan of the flags (nil with --cron).
func (sf *scheduleFlags) plan(fs *pflag.FlagSet) (*rota.PlanSpec, error) {
	switch {
	case sf.p.CronExpr != "" && sf.planType != "":
		return nil, usageError("give --cron or --plan-type, not both")
	case sf.p.CronExpr == "" && sf.planType == "":
		return nil, usageError("--cron or --plan-type is required")
	case sf.planType == "":
		for _, name := range []string{"plan-value", "plan-repeat", "plan-time", "no-keep"} {
			if fs.Changed(name) {
				return nil, usageError("--%s needs --plan-type", name)
			}
		}
		return nil, nil
	}
	plan := &rota.PlanSpec{Type: strings.ToLower(sf.planType), Value: sf.planValue, Repeat: sf.planRepeat, NoKeep: sf.noKeep}
	if sf.planTime != "" {
		t, err := parsePlanTime(sf.planTime, sf.p.Timezone)
		if err != nil {
			return nil, usageError("--plan-time %q: %v", sf.planTime, err)
		}
		plan.Time = t
	}
	return plan, nil
}

// target returns the HTTP target of the flags (nil without --target-url).
func (sf *scheduleFlags) target() (*rota.Target, error) {
	if sf.targetURL == "" {
		if sf.targetVerb != "" || len(sf.targetHeaders) > 0 {
			return nil, usageError("--target-method and --target-header need --target-url")
		}
		return nil, nil
	}
	t := &rota.Target{URL: sf.targetURL, Method: strings.ToUpper(sf.targetVerb)}
	for _, h := range sf.targetHeaders {
		k, v, ok := strings.Cut(h, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, usageError("--target-header %q: want NAME=VALUE", h)
		}
		if t.Headers == nil {
			t.Headers = map[string]string{}
		}
		t.Headers[k] = v
	}
	return t, nil
}

// createSchedule posts a raw schedule body and prints the new id.
func (o *apiOpts) createSchedule(ctx context.Context, body json.RawMessage) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodPost, "/api/schedules", body, &raw); err != nil {
		return o.fail(err)
	}
	if o.json() {
		return writeJSON(o.env.Stdout, raw)
	}
	var out struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	_, err = fmt.Fprintln(o.env.Stdout, out.ScheduleID)
	return err
}

// readJSONArg reads a JSON document from a file, or standard input for -,
// checked to be JSON.
func readJSONArg(stdin io.Reader, flag, file string) (json.RawMessage, error) {
	var (
		b   []byte
		err error
	)
	if file == "-" {
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("read %s from standard input: %w", flag, err)
		}
	} else if b, err = os.ReadFile(file); err != nil {
		return nil, usageError("%s: %v", flag, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, usageError("%s %s: not valid JSON: %v", flag, file, err)
	}
	return b, nil
}

// parsePlanTime reads a plan time: RFC 3339, unix seconds, or a time of
// day HH:MM[:SS] in zone tz (an instant on 1970-01-01 whose wall time in tz
// is that time of day, which is what week and month plans read).
func parsePlanTime(s, tz string) (int64, error) {
	if t, err := parseTime(s); err == nil {
		return t.Unix(), nil
	}
	var tod time.Time
	var err error
	for _, layout := range []string{"15:04:05", "15:04"} {
		if tod, err = time.Parse(layout, s); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("want RFC 3339 (2025-01-02T15:04:05Z), unix seconds or a time of day HH:MM[:SS]")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return 0, fmt.Errorf("the time of day needs a known --timezone: %v", err)
	}
	return time.Date(1970, 1, 1, tod.Hour(), tod.Minute(), tod.Second(), 0, loc).Unix(), nil
}

func newScheduleListCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{"limit": "limit", "cursor": "cursor"}}
	var (
		p   rotaclient.ScheduleListParams
		all bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules, newest first",
		Long: `List schedules, newest first, one page at a time (--limit). When there are more,
the command to see the next page goes to standard error; --all lists every page.
NEXT_FIRE is "-" for a paused or ended schedule, and while a plan waits for its run.`,
		Example: `  rota schedule list
  rota schedule list --all -o json | jq -r '.schedules[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if o.json() {
				return o.pagedJSON(ctx, c, "schedules", all, p.Cursor, func(cursor string) string {
					return "/api/schedules" + rotaclient.ScheduleListParams{Limit: p.Limit, Cursor: cursor}.Encode()
				})
			}
			return printListing(o, listing[rota.Schedule]{
				header: scheduleHeader(), row: scheduleRow, all: all, each: c.AllSchedules(ctx, p),
				page: func() ([]rota.Schedule, string, error) {
					page, err := c.ListSchedules(ctx, p)
					if err != nil {
						return nil, "", err
					}
					return page.Schedules, page.NextCursor, nil
				},
				more: cmd.CommandPath(),
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&p.Limit, "limit", 50, "schedules per page (1-1000)")
	f.StringVar(&p.Cursor, "cursor", "", "start after this cursor (printed after a page that has more)")
	f.BoolVar(&all, "all", false, "list every page")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

// pagedJSON prints the data of a paged list route (key holds the items):
// one page as the API gives it, or with all, the items of every page from
// cursor on in one list.
func (o *apiOpts) pagedJSON(ctx context.Context, c *rotaclient.Client, key string, all bool, cursor string, path func(cursor string) string) error {
	if !all {
		return o.call(ctx, c, http.MethodGet, path(cursor), nil)
	}
	items := []json.RawMessage{}
	for {
		var page map[string]json.RawMessage
		if err := c.Do(ctx, http.MethodGet, path(cursor), nil, &page); err != nil {
			return o.fail(err)
		}
		var (
			got  []json.RawMessage
			next string
		)
		if err := json.Unmarshal(page[key], &got); err != nil {
			return fmt.Errorf("decode the %s: %w", key, err)
		}
		if raw, ok := page["next_cursor"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return fmt.Errorf("decode next_cursor: %w", err)
			}
		}
		items = append(items, got...)
		if next == "" || next == cursor {
			// In the API's order: the items, then the (empty) cursor.
			list, err := json.Marshal(items)
			if err != nil {
				return err
			}
			k, _ := json.Marshal(key)
			return writeJSON(o.env.Stdout, json.RawMessage(fmt.Sprintf(`{%s:%s,"next_cursor":""}`, k, list)))
		}
		cursor = next
	}
}

func scheduleHeader() []string {
	return []string{"ID", "NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT_FIRE"}
}

func scheduleRow(t *table, s *rota.Schedule) {
	enabled := cell(s.Enabled)
	if s.Ended {
		enabled = "ended"
	}
	t.row(s.ID, short(s.Name, 40), s.Kind, short(timetable(s), 50), enabled, s.NextFire)
}

// timetable summarises when a schedule fires: its cron expression (with
// its zone unless UTC) or its plan.
func timetable(s *rota.Schedule) string {
	if s.Plan != nil {
		return planSummary(s.Plan, s.Timezone)
	}
	if s.Timezone != "" && s.Timezone != "UTC" {
		return s.CronExpr + " (" + s.Timezone + ")"
	}
	return s.CronExpr
}

// planSummary says in a few words when a plan runs.
func planSummary(p *rota.PlanSpec, tz string) string {
	repeat := func() string {
		switch {
		case p.Repeat < 0:
			return ", forever"
		case p.Repeat <= 1:
			return ", once"
		}
		return fmt.Sprintf(", %d times", p.Repeat)
	}
	timeOfDay := func() string {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			loc = time.UTC
		}
		t := time.Unix(p.Time, 0).In(loc)
		if t.Second() != 0 {
			return t.Format("15:04:05")
		}
		return t.Format("15:04")
	}
	zone := ""
	if tz != "" && tz != "UTC" {
		zone = " (" + tz + ")"
	}
	switch p.Type {
	case "none":
		return "once, when created"
	case "time":
		return "once at " + cell(time.Unix(p.Time, 0))
	case "second", "minute", "hour", "day":
		s := fmt.Sprintf("every %d%s", p.Value, p.Type[:1])
		if p.NoKeep {
			s += " after each run"
		}
		return s + repeat()
	case "week":
		day := strconv.Itoa(p.Value)
		if p.Value >= 0 && p.Value <= 6 {
			day = time.Weekday(p.Value).String()[:3]
		}
		return "weekly on " + day + " at " + timeOfDay() + zone + repeat()
	case "month":
		day := "day " + strconv.Itoa(p.Value)
		switch {
		case p.Value == 0:
			day = "the last day"
		case p.Value < 0:
			day = fmt.Sprintf("the last day %d", p.Value)
		}
		return "monthly on " + day + " at " + timeOfDay() + zone + repeat()
	}
	return "plan " + p.Type
}

func newScheduleGetCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[*rota.Schedule]{
		Use:    "get SCHEDULE",
		Short:  "Show a schedule (by id or name)",
		Arg:    "SCHEDULE",
		Method: http.MethodGet, Path: refPath("/api/schedules/", ""),
		Do:   (*rotaclient.Client).GetSchedule,
		Show: printSchedule,
	})
}

// printSchedule shows every field of a schedule. The target's header
// values are left out (they often hold credentials); -o json has them.
func printSchedule(w io.Writer, s *rota.Schedule) error {
	t := newTable(w)
	t.row("ID:", s.ID)
	t.row("Name:", s.Name)
	t.row("Kind:", s.Kind)
	t.row("Priority:", s.Priority)
	switch {
	case s.Ended:
		t.row("Enabled:", "no: the plan ended "+cell(s.EndedAt))
	default:
		t.row("Enabled:", s.Enabled)
	}
	if s.Plan != nil {
		t.row("Plan:", planSummary(s.Plan, s.Timezone))
		p := s.Plan
		t.row("Plan fields:", fmt.Sprintf("type %s, value %d, repeat %d, time %d, no_keep %v", p.Type, p.Value, p.Repeat, p.Time, p.NoKeep))
		t.row("Plan progress:", fmt.Sprintf("occurrence %d, %d succeeded", s.PlanSeq, s.RealRepet))
	} else {
		t.row("Cron:", s.CronExpr)
	}
	t.row("Timezone:", s.Timezone)
	t.row("Next fire:", s.NextFire)
	t.row("Max concurrency:", s.MaxConcurrency)
	t.row("Concurrency policy:", s.ConcurrencyPolicy)
	t.row("Overlap action:", s.OverlapAction)
	t.row("Failure action:", s.FailureAction)
	switch s.FailureAction {
	case rota.FailureBackoff:
		t.row("Backoff:", fmt.Sprintf("%s doubling up to %s; %d failures in a row, next allowed %s",
			formatSeconds(s.BackoffSeconds), formatSeconds(s.BackoffMaxSeconds), s.ConsecutiveFailures, cell(s.NextAllowedAt)))
	case rota.FailureHalfOpen:
		t.row("Circuit:", fmt.Sprintf("%s; %d failures in a row (opens at %d, cool-down %s), next allowed %s", circuitOf(s),
			s.ConsecutiveFailures, s.FailureThreshold, formatSeconds(s.CooldownSeconds), cell(s.NextAllowedAt)))
	}
	if s.ErrorMessage != "" {
		t.row("Error:", s.ErrorMessage+" (rota schedule resume once fixed)")
	}
	if s.EndReason != "" {
		t.row("Ended because:", s.EndReason)
	}
	misfire := string(s.MisfirePolicy)
	if s.MisfirePolicy == rota.MisfireCatchUpLimited {
		misfire += fmt.Sprintf(" (limit %d)", s.CatchupLimit)
	}
	t.row("Misfire policy:", misfire)
	if s.TimeoutSeconds > 0 {
		t.row("Timeout:", formatSeconds(s.TimeoutSeconds))
	} else {
		t.row("Timeout:", "none (the kind's default, as for any task)")
	}
	if tg := s.Target; tg != nil {
		target := tg.Method + " " + tg.URL
		if len(tg.Headers) > 0 {
			target += " (headers: " + strings.Join(slices.Sorted(maps.Keys(tg.Headers)), ", ") + ")"
		}
		t.row("Target:", short(target, 200))
	} else {
		t.row("Target:", "workers")
	}
	t.row("Payload:", short(string(s.Payload), 200))
	t.row("Last run:", s.LastRunID)
	t.row("Misfires dropped:", s.MisfireDropped)
	t.row("Version:", s.Version)
	t.row("Created:", s.CreatedAt)
	t.row("Updated:", s.UpdatedAt)
	return t.flush()
}

func newSchedulePauseCmd(env Env, pause bool) *cobra.Command {
	r := oneRef[*rota.Schedule]{
		Use:   "pause SCHEDULE",
		Short: "Pause a schedule: it fires nothing until resumed",
		Long:  `Pause a schedule: it fires nothing until resumed. Runs already fired go on.`,
		Arg:   "SCHEDULE", Method: http.MethodPost, Path: refPath("/api/schedules/", "/pause"),
		Do: (*rotaclient.Client).PauseSchedule, Show: printScheduleRow,
	}
	if !pause {
		r.Use, r.Short = "resume SCHEDULE", "Resume a paused schedule"
		r.Long = `Resume a paused schedule. Fire times of the pause are not caught up: the
schedule fires from its next fire time after now on.`
		r.Path, r.Do = refPath("/api/schedules/", "/resume"), (*rotaclient.Client).ResumeSchedule
	}
	return newOneRefCmd(env, r)
}

// circuitOf is the circuit of a HALF_OPEN schedule ("" reads closed).
func circuitOf(s *rota.Schedule) string {
	if s.Circuit == "" {
		return string(rota.CircuitClosed)
	}
	return string(s.Circuit)
}

// printScheduleRow prints a schedule as one row of the schedules table.
func printScheduleRow(w io.Writer, s *rota.Schedule) error {
	t := newTable(w, scheduleHeader()...)
	scheduleRow(t, s)
	return t.flush()
}

func newScheduleTriggerCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[rotaclient.TriggerResult]{
		Use:   "trigger SCHEDULE",
		Short: "Fire a schedule once, now, and print the new run's task id",
		Long: `Fire a schedule once, now, outside its timetable (even when paused), and print
the task id of the new run. See it with rota task get. The overlap and concurrency
policies apply: a trigger they skip is recorded as a SKIPPED run, and the line
printed is "TASK_ID SKIPPED REASON" (POST /api/schedules/{id}/trigger with
{"force": true} bypasses them).`,
		Arg:    "SCHEDULE",
		Method: http.MethodPost, Path: refPath("/api/schedules/", "/trigger"),
		Do: (*rotaclient.Client).TriggerSchedule,
		Show: func(w io.Writer, res rotaclient.TriggerResult) error {
			if res.Status == rota.StatusSkipped {
				return printLine(w, res.TaskID+" SKIPPED "+string(res.Reason))
			}
			return printLine(w, res.TaskID)
		},
	})
}

func newScheduleDeleteCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[string]{
		Use:   "delete SCHEDULE",
		Short: "Delete a schedule and print its id",
		Long: `Delete a schedule and print its id. Its queued runs (concurrency policy QUEUE)
are canceled, and so are the runs of a schedule with --target-url that have not
started; its other runs, finished or not, are left as they are.`,
		Arg:    "SCHEDULE",
		Method: http.MethodDelete, Path: refPath("/api/schedules/", ""),
		Do:   (*rotaclient.Client).DeleteSchedule,
		Show: printLine,
	})
}

func newScheduleRunsCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{"status": "status", "limit": "limit", "cursor": "cursor"}}
	var (
		p   rotaclient.ScheduleRunsParams
		st  string
		all bool
	)
	cmd := &cobra.Command{
		Use:   "runs SCHEDULE",
		Short: "List a schedule's runs, newest fire first",
		Long: `List a schedule's runs, newest fire first, one page at a time (--limit); --all
lists every page. Each run is a task (see it with rota task get TASK). REASON says
which policy skipped a SKIPPED run, and marks runs fired by a trigger and runs
queued for a concurrency slot (held).`,
		Example: `  rota schedule runs nightly-report --status FAILED
  rota schedule runs nightly-report --all -o json | jq -r '.runs[].task_id'`,
		Args: exactArgs("SCHEDULE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			p.Status = rota.Status(strings.ToUpper(st))
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, ref := cmd.Context(), args[0]
			if o.json() {
				return o.pagedJSON(ctx, c, "runs", all, p.Cursor, func(cursor string) string {
					q := p
					q.Cursor = cursor
					return "/api/schedules/" + pathEscape(ref) + "/runs" + q.Encode()
				})
			}
			return printListing(o, listing[rota.ScheduleRun]{
				header: []string{"TASK", "FIRE_TIME", "ATTEMPT", "STATUS", "REASON", "STARTED", "ENDED", "MESSAGE"},
				row:    scheduleRunRow, all: all, each: c.AllScheduleRuns(ctx, ref, p),
				page: func() ([]rota.ScheduleRun, string, error) {
					page, err := c.ListScheduleRuns(ctx, ref, p)
					if err != nil {
						return nil, "", err
					}
					return page.Runs, page.NextCursor, nil
				},
				more: cmd.CommandPath() + " " + ref,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&st, "status", "", "only runs in this status: "+statusNames())
	f.IntVar(&p.Limit, "limit", 50, "runs per page (1-1000)")
	f.StringVar(&p.Cursor, "cursor", "", "start after this cursor (printed after a page that has more)")
	f.BoolVar(&all, "all", false, "list every page")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func scheduleRunRow(t *table, r *rota.ScheduleRun) {
	var notes []string
	if r.Reason != "" {
		notes = append(notes, string(r.Reason))
	}
	if r.Triggered {
		notes = append(notes, "triggered")
	}
	if r.Held {
		notes = append(notes, "held")
	}
	t.row(r.TaskID, r.FireTime, r.Attempt, r.Status, notes, r.StartTime, r.EndTime, short(r.Message, 60))
}

func newScheduleNextCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{"n": "count", "from": "from"}}
	var (
		n    int
		from string
	)
	cmd := &cobra.Command{
		Use:   "next SCHEDULE [-n COUNT] [--from TIME]",
		Short: "Show a schedule's next fire times",
		Long: `Show a schedule's next fire times after now (or --from), in UTC. A paused
schedule shows its timetable all the same; an ended plan shows none.`,
		Example: `  rota schedule next nightly-report -n 5
  rota schedule next weekly --from 2030-01-01T00:00:00Z -o json`,
		Args: exactArgs("SCHEDULE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			// The query is sent as given, so that the server judges -n.
			q := url.Values{"n": {strconv.Itoa(n)}}
			if from != "" {
				at, err := parseTime(from)
				if err != nil {
					return usageError("--from %q: %v", from, err)
				}
				q.Set("from", strconv.FormatInt(at.Unix(), 10))
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/api/schedules/" + pathEscape(args[0]) + "/next?" + q.Encode()
			if o.json() {
				return o.call(cmd.Context(), c, http.MethodGet, path, nil)
			}
			var out struct {
				FireTimes []int64 `json:"fire_times"`
			}
			if err := c.Do(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return o.fail(err)
			}
			t := newTable(env.Stdout, "FIRE_TIME")
			for _, ft := range out.FireTimes {
				t.row(time.Unix(ft, 0))
			}
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.IntVarP(&n, "count", "n", 10, "how many fire times (1-1000)")
	f.StringVar(&from, "from", "", "list the fire times after this time: RFC 3339 or unix seconds (default now)")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}
