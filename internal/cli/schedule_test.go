package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// scheduleUnixRE matches the schedule JSON's instants that normalize
// leaves alone.
var scheduleUnixRE = regexp.MustCompile(`("(?:updated_at|next_fire_time|high_water|fire_time|plan_at)": )[1-9]\d*`)

func TestScheduleCreateListGet(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Cron, with most flags.
	nightly := strings.TrimSpace(b.ok(t, "schedule", "create", "--name", "nightly", "--kind", "report", "--cron", "0 2 * * *",
		"--timezone", "Europe/Paris", "--payload", `{"n":1}`, "--priority", "HIGH", "--max-concurrency", "2",
		"--concurrency-policy", "queue", "--overlap", "skip", "--failure", "retry", "--misfire", "catch_up_limited",
		"--catchup-limit", "3", "--timeout", "1m"))
	if !rota.ValidID(nightly) {
		t.Fatalf("create printed %q", nightly)
	}
	// A week plan at a time of day in a zone, paused, with an HTTP target.
	weekly := strings.TrimSpace(b.ok(t, "schedule", "create", "--name", "weekly", "--kind", "email", "--plan-type", "week",
		"--plan-value", "1", "--plan-time", "09:00", "--timezone", "America/New_York", "--enabled=false",
		"--target-url", "https://example.com/hook", "--target-method", "put",
		"--target-header", "Authorization=Bearer secret", "--target-header", "X-Trace=a=b"))
	// An interval plan whose payload comes from standard input.
	every := strings.TrimSpace(b.runIn(t, `{"to":"ops"}`, "schedule", "create", "--name", "every30", "--kind", "email",
		"--plan-type", "minute", "--plan-value", "30", "--plan-repeat", "5", "--payload-file", "-").stdout)
	// The raw API body from a file, -o json.
	spec := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(spec, []byte(`{"name":"from-file","kind":"sync","task":[1,2],"plan":{"plan_type":"time","plan_time":4102444800}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var created struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "create", "--file", spec, "-o", "json")), &created); err != nil || !rota.ValidID(created.ScheduleID) {
		t.Fatalf("create --file -o json: %+v %v", created, err)
	}

	s, err := b.client.GetSchedule(b.ctx, weekly)
	if err != nil {
		t.Fatal(err)
	}
	wantPlan := rota.PlanSpec{Type: "week", Value: 1, Repeat: -1, Time: 14 * 3600} // 09:00 EST is 14:00 UTC
	if s.Plan == nil || *s.Plan != wantPlan || s.Enabled || s.Target == nil || s.Target.Method != "PUT" ||
		s.Target.Headers["Authorization"] != "***" || s.Target.Headers["X-Trace"] != "***" { // values are never shown
		t.Errorf("weekly = %+v plan %+v target %+v", s, s.Plan, s.Target)
	}
	if s, err := b.client.GetSchedule(b.ctx, every); err != nil || string(s.Payload) != `{"to":"ops"}` || s.Plan.Repeat != 5 {
		t.Errorf("every30 = %+v, %v", s, err)
	}

	golden(t, "schedule_list", b.ok(t, "schedule", "list"))
	golden(t, "schedule_get_cron", b.ok(t, "schedule", "get", nightly))
	golden(t, "schedule_get_plan", b.ok(t, "schedule", "get", "weekly")) // by name
	golden(t, "schedule_get_json", scheduleUnixRE.ReplaceAllString(b.ok(t, "schedule", "get", "nightly", "-o", "json"), "${1}1000000000"))

	// Paging: one per page, the next page's command on stderr; --all gets all.
	r := b.run(t, "schedule", "list", "--limit", "1")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, "more: rota schedule list --cursor ") {
		t.Errorf("paged list: %+v", r)
	}
	if out := b.ok(t, "schedule", "list", "--limit", "1", "--all"); strings.Count(out, "\n") != 5 {
		t.Errorf("list --all:\n%s", out)
	}
	var page struct {
		Schedules []struct {
			ScheduleID string `json:"schedule_id"`
			Name       string `json:"name"`
		} `json:"schedules"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "list", "--limit", "1", "-o", "json")), &page); err != nil ||
		len(page.Schedules) != 1 || page.NextCursor == nil || *page.NextCursor == "" {
		t.Errorf("list -o json: %+v %v", page, err)
	}
	out := b.ok(t, "schedule", "list", "--limit", "3", "--all", "-o", "json")
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Schedules) != 4 || *page.NextCursor != "" ||
		page.Schedules[0].Name != "from-file" || page.Schedules[3].ScheduleID != nightly {
		t.Errorf("list --all -o json: %+v %v", page, err)
	}
	if !strings.HasPrefix(out, "{\n  \"schedules\": [") {
		t.Errorf("list --all -o json does not keep the API's order:\n%.40s", out)
	}

	// Fire times, from a fixed instant: 02:00 in Paris is 01:00 UTC in winter.
	if got, want := b.ok(t, "schedule", "next", "nightly", "-n", "2", "--from", "2030-01-01T00:00:00Z"),
		"FIRE_TIME\n2030-01-01T01:00:00Z\n2030-01-02T01:00:00Z\n"; got != want {
		t.Errorf("next = %q, want %q", got, want)
	}
	var fires struct {
		FireTimes []int64 `json:"fire_times"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "next", "weekly", "--count", "1", "--from", "1893456000", "-o", "json")), &fires); err != nil ||
		len(fires.FireTimes) != 1 || fires.FireTimes[0] != time.Date(2030, 1, 7, 14, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("next -o json: %+v %v", fires, err)
	}

	// A taken name is a conflict (4).
	if msg := b.wantExit(t, ExitConflict, "schedule", "create", "--name", "nightly", "--kind", "report", "--cron", "@daily"); !strings.Contains(msg, "nightly") {
		t.Errorf("duplicate name: %q", msg)
	}
	// Not found (3).
	for _, args := range [][]string{{"schedule", "get", "nope"}, {"schedule", "get", "0123456789abcdef0123456789abcdef", "-o", "json"}, {"schedule", "next", "nope"}} {
		if msg := b.wantExit(t, ExitNotFound, args...); !strings.Contains(msg, `no schedule with id or name`) {
			t.Errorf("%v: %q", args, msg)
		}
	}
	// Input the server refuses names the field and the flag (2); so do
	// the command's own checks.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name":"x","kind":"k","task":{},"cron_expr":"@daily","bogus":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	create := []string{"schedule", "create", "--name", "x", "--kind", "k"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(create, "--cron", "0 2 * *"), `field "cron_expr": expected 5, 6 or 7 fields, got 4 (flag --cron)`},
		{append(create, "--cron", "@daily", "--timezone", "Mars/Base"), `field "timezone"`},
		{append(create, "--cron", "@daily", "--overlap", "nope"), `(flag --overlap)`},
		{append(create, "--cron", "@daily", "--priority", "urgent"), `(flag --priority)`},
		{append(create, "--cron", "@daily", "--misfire", "catch_up_limited"), `(flag --catchup-limit)`},
		{append(create, "--cron", "@daily", "--target-url", "ftp://x"), `field "target.url"`},
		{append(create, "--plan-type", "week", "--plan-value", "9"), `field "plan.plan_value": week day must be 0-6 (Sunday 0) (flag --plan-value)`},
		{append(create, "--plan-type", "fortnight"), `(flag --plan-type)`},
		{append(create, "--plan-type", "week", "--plan-time", "25:00"), `--plan-time "25:00"`},
		{append(create, "--cron", "@daily", "--plan-type", "none"), "give --cron or --plan-type, not both"},
		{append(create, "--cron", "@daily", "--no-keep"), "--no-keep needs --plan-type"},
		{append(create, "--cron", "@daily", "--target-header", "A=b"), "need --target-url"},
		{append(create, "--cron", "@daily", "--target-url", "http://h", "--target-header", "A"), "want NAME=VALUE"},
		{append(create, "--cron", "@daily", "--payload", "{bad"), "--payload: not valid JSON"},
		{append(create, "--cron", "@daily", "--timeout", "soon"), "--timeout"},
		{create, "--cron or --plan-type is required"},
		{[]string{"schedule", "create", "--kind", "k", "--cron", "@daily"}, "--name is required"},
		{[]string{"schedule", "create", "--name", "x", "--cron", "@daily"}, "--kind is required"},
		{[]string{"schedule", "create", "--file", spec, "--name", "y"}, "give --file or the schedule flags (--name), not both"},
		{[]string{"schedule", "create", "--file", bad}, `unknown field "bogus"`},
		{[]string{"schedule", "create", "--file", filepath.Join(t.TempDir(), "none.json")}, "--file"},
		{[]string{"schedule", "next", "nightly", "-n", "0"}, `field "n": must be an integer between 1 and 1000, got "0" (flag --count)`},
		{[]string{"schedule", "next", "nightly", "--from", "soon"}, `--from "soon"`},
		{[]string{"schedule", "list", "--limit", "5000"}, `(flag --limit)`},
		{[]string{"schedule", "list", "-o", "yaml"}, "want table or json"},
		{[]string{"schedule", "get"}, "want 1 argument(s): SCHEDULE"},
		{[]string{"schedule", "frobnicate"}, "unknown command"},
	} {
		if msg := b.wantExit(t, ExitUsage, tc.args...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, msg, tc.want)
		}
	}
	if msg := b.runIn(t, "{nope", "schedule", "create", "--file", "-"); msg.code != ExitUsage || !strings.Contains(msg.stderr, "--file -: not valid JSON") {
		t.Errorf("create --file - with bad JSON: %+v", msg)
	}
	// The flag hint is left out for --file: the field is the file's.
	if msg := b.wantExit(t, ExitUsage, "schedule", "create", "--file", bad); strings.Contains(msg, "(flag") {
		t.Errorf("create --file names a flag: %q", msg)
	}
	// Nothing was created by the failures.
	if p, err := b.client.ListSchedules(b.ctx, rotaclient.ScheduleListParams{}); err != nil || len(p.Schedules) != 4 {
		t.Errorf("schedules after the failures: %+v, %v", p, err)
	}
	// A past time plan is accepted and stored ended, never run.
	b.run(t, "schedule", "create", "--name", "past", "--kind", "k", "--plan-type", "time", "--plan-time", "2001-01-01T00:00:00Z")
	if s, err := b.client.GetSchedule(b.ctx, "past"); err != nil || !s.Ended || s.RealRepet != 0 || s.EndReason == "" {
		t.Errorf("past time plan: %+v, %v", s, err)
	}
}

func TestScheduleRunCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Daily at 02:00 in 2099 (seconds first, then a year): only triggers fire.
	id := strings.TrimSpace(b.ok(t, "schedule", "create", "--name", "nightly", "--kind", "report", "--cron", "0 0 2 * * * 2099", "--payload", `{"n":1}`))

	golden(t, "schedule_pause", b.ok(t, "schedule", "pause", "nightly"))
	if s, err := b.client.GetSchedule(b.ctx, id); err != nil || s.Enabled || !s.NextFire.IsZero() {
		t.Errorf("paused = %+v, %v", s, err)
	}
	if out := b.ok(t, "schedule", "resume", id); !strings.Contains(out, "0 0 2 * * * 2099  yes      2099-") {
		t.Errorf("resume:\n%s", out)
	}
	var resumed struct {
		Enabled      bool  `json:"enabled"`
		NextFireTime int64 `json:"next_fire_time"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "pause", id, "-o", "json")), &resumed); err != nil || resumed.Enabled || resumed.NextFireTime != 0 {
		t.Errorf("pause -o json: %+v %v", resumed, err)
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "resume", id, "-o", "json")), &resumed); err != nil || !resumed.Enabled || resumed.NextFireTime == 0 {
		t.Errorf("resume -o json: %+v %v", resumed, err)
	}

	// Trigger: a run now, whose task a worker runs.
	first := strings.TrimSpace(b.ok(t, "schedule", "trigger", "nightly"))
	task, err := b.client.GetTask(b.ctx, first)
	if err != nil || task.ScheduleID != id || task.Kind != "report" || string(task.Payload) != `{"n":1}` {
		t.Fatalf("triggered task = %+v, %v", task, err)
	}
	cl, err := b.client.Claim(b.ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"report"}, Max: 1})
	if err != nil || len(cl.Runs) != 1 || cl.Runs[0].TaskID != first {
		t.Fatalf("claim = %+v, %v", cl, err)
	}
	if err := b.client.Succeed(b.ctx, cl.Runs[0].RunID, rotaclient.SucceedParams{WorkerID: "w1", Message: "report\tsent"}); err != nil {
		t.Fatal(err)
	}
	var trig struct {
		TaskID   string `json:"task_id"`
		FireTime int64  `json:"fire_time"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "trigger", id, "-o", "json")), &trig); err != nil || !rota.ValidID(trig.TaskID) || trig.FireTime == 0 {
		t.Fatalf("trigger -o json: %+v %v", trig, err)
	}
	golden(t, "schedule_runs", b.ok(t, "schedule", "runs", "nightly"))
	if out := b.ok(t, "schedule", "runs", "nightly", "--status", "success"); strings.Count(out, "\n") != 2 || !strings.Contains(out, first) {
		t.Errorf("runs --status success:\n%s", out)
	}
	r := b.run(t, "schedule", "runs", "nightly", "--limit", "1")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, trig.TaskID) ||
		!strings.Contains(r.stderr, "more: rota schedule runs nightly --cursor ") {
		t.Errorf("paged runs: %+v", r)
	}
	if out := b.ok(t, "schedule", "runs", "nightly", "--limit", "1", "--all"); strings.Count(out, "\n") != 3 {
		t.Errorf("runs --all:\n%s", out)
	}
	var runs struct {
		Runs []struct {
			TaskID    string `json:"task_id"`
			Status    string `json:"status"`
			Triggered bool   `json:"triggered"`
		} `json:"runs"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "runs", id, "--limit", "1", "--all", "-o", "json")), &runs); err != nil ||
		len(runs.Runs) != 2 || runs.Runs[1].TaskID != first || runs.Runs[1].Status != "SUCCESS" || !runs.Runs[0].Triggered || runs.NextCursor != "" {
		t.Errorf("runs --all -o json: %+v %v", runs, err)
	}
	if msg := b.wantExit(t, ExitUsage, "schedule", "runs", id, "--status", "DONE"); !strings.Contains(msg, `field "status"`) || !strings.Contains(msg, "(flag --status)") {
		t.Errorf("runs --status DONE: %q", msg)
	}

	// Delete by name prints the id; then everything about it is not found (3).
	if out := strings.TrimSpace(b.ok(t, "schedule", "delete", "nightly")); out != id {
		t.Errorf("delete printed %q, want %q", out, id)
	}
	for _, args := range [][]string{
		{"schedule", "get", id}, {"schedule", "delete", id}, {"schedule", "pause", id}, {"schedule", "resume", "nightly"},
		{"schedule", "trigger", id}, {"schedule", "runs", id}, {"schedule", "delete", id, "-o", "json"},
	} {
		if msg := b.wantExit(t, ExitNotFound, args...); !strings.Contains(msg, "no schedule with id or name") {
			t.Errorf("%v: %q", args, msg)
		}
	}
	// Its runs stay: they are tasks.
	if task, err := b.client.GetTask(b.ctx, first); err != nil || task.Status != rota.StatusSuccess {
		t.Errorf("run after delete = %+v, %v", task, err)
	}
	var del struct {
		ScheduleID string `json:"schedule_id"`
	}
	id2 := strings.TrimSpace(b.ok(t, "schedule", "create", "--name", "other", "--kind", "report", "--cron", "@yearly"))
	if err := json.Unmarshal([]byte(b.ok(t, "schedule", "delete", "other", "-o", "json")), &del); err != nil || del.ScheduleID != id2 {
		t.Errorf("delete -o json: %+v %v", del, err)
	}
	golden(t, "schedule_list_empty", b.ok(t, "schedule", "list"))
}

func TestScheduleHelp(t *testing.T) {
	t.Parallel()
	b := &bundle{env: map[string]string{}}
	b.ctx = t.Context()
	if out := b.ok(t, "--help"); !strings.Contains(out, "schedule") {
		t.Errorf("rota --help lacks schedule:\n%s", out)
	}
	for _, sub := range []string{"create", "list", "get", "pause", "resume", "trigger", "delete", "runs", "next"} {
		out := b.ok(t, "schedule", sub, "--help")
		if !strings.Contains(out, "Usage:") || !strings.Contains(out, "rota schedule "+sub) || !strings.Contains(out, "(env ROTA_SERVER)") {
			t.Errorf("rota schedule %s --help:\n%s", sub, out)
		}
	}
	if out := b.ok(t, "schedule"); !strings.Contains(out, "SCHEDULE is a schedule's id or its name") {
		t.Errorf("rota schedule:\n%s", out)
	}
}

func TestPlanSummary(t *testing.T) {
	t.Parallel()
	nine := time.Date(1970, 1, 1, 9, 0, 0, 0, time.UTC).Unix()
	tests := []struct {
		plan rota.PlanSpec
		tz   string
		want string
	}{
		{rota.PlanSpec{Type: "none"}, "", "once, when created"},
		{rota.PlanSpec{Type: "time", Time: 4102444800}, "UTC", "once at 2100-01-01T00:00:00Z"},
		{rota.PlanSpec{Type: "second", Value: 90, Repeat: -1}, "", "every 90s, forever"},
		{rota.PlanSpec{Type: "hour", Value: 2, Repeat: 1}, "", "every 2h, once"},
		{rota.PlanSpec{Type: "day", Value: 1, Repeat: 7, NoKeep: true}, "", "every 1d after each run, 7 times"},
		{rota.PlanSpec{Type: "week", Value: 0, Repeat: -1, Time: nine}, "", "weekly on Sun at 09:00, forever"},
		{rota.PlanSpec{Type: "week", Value: 5, Repeat: 3, Time: nine + 30}, "Asia/Tokyo", "weekly on Fri at 18:00:30 (Asia/Tokyo), 3 times"},
		{rota.PlanSpec{Type: "month", Value: 15, Repeat: -1}, "UTC", "monthly on day 15 at 00:00, forever"},
		{rota.PlanSpec{Type: "month", Value: 0, Repeat: -1, Time: nine}, "", "monthly on the last day at 09:00, forever"},
		{rota.PlanSpec{Type: "month", Value: -2, Repeat: 2}, "", "monthly on the last day -2 at 00:00, 2 times"},
		{rota.PlanSpec{Type: "fortnight"}, "", "plan fortnight"},
	}
	for _, tt := range tests {
		if got := planSummary(&tt.plan, tt.tz); got != tt.want {
			t.Errorf("planSummary(%+v, %q) = %q, want %q", tt.plan, tt.tz, got, tt.want)
		}
	}
}

func TestParsePlanTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, tz string
		want   int64
	}{
		{"1700000000", "", 1700000000},
		{"2030-01-01T00:00:00Z", "Europe/Paris", 1893456000},
		{"09:00", "", 9 * 3600},
		{"9:30:15", "UTC", 9*3600 + 30*60 + 15},
		{"09:00", "America/New_York", 14 * 3600},
	}
	for _, tt := range tests {
		got, err := parsePlanTime(tt.in, tt.tz)
		if err != nil || got != tt.want {
			t.Errorf("parsePlanTime(%q, %q) = %d, %v; want %d", tt.in, tt.tz, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "soon", "25:00", "09:00 pm"} {
		if _, err := parsePlanTime(in, ""); err == nil {
			t.Errorf("parsePlanTime(%q): no error", in)
		}
	}
	if _, err := parsePlanTime("09:00", "Mars/Base"); err == nil || !strings.Contains(err.Error(), "--timezone") {
		t.Errorf("parsePlanTime with an unknown zone: %v", err)
	}
}
