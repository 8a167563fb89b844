package httpapi

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/netguard"
)

// A target URL on a refused literal address or localhost is refused when
// the schedule is created or edited: 400 naming target.url, saying why.
func TestScheduleTargetRefusedAddress(t *testing.T) {
	t.Parallel()
	g, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.2", "10.9.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	e := setupSchedules(t, func(o *setupOptions) { o.targetGuard = g })
	body := func(name, u string) map[string]any {
		return map[string]any{"name": name, "kind": "k", "task": 1, "cron_expr": "@daily", "target": map[string]any{"url": u}}
	}
	for _, tc := range []struct{ url, why string }{
		{"http://127.0.0.1:8080/hook", "loopback"},
		{"http://localhost/hook", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::ffff:10.0.0.1]/", "private"},
		{"http://0.0.0.0:80/", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"https://192.168.1.10/", "private"},
		{"http://100.64.0.1/", "CGNAT"},
		{"http://[fd00::1]/", "unique-local"},
		{"http://224.0.0.1/", "multicast"},
	} {
		r := e.do("POST", "/api/schedules", body("s", tc.url))
		wantErr(t, r, rota.CodeInvalid)
		if r.Status != 400 || r.field() != "target.url" || !strings.Contains(r.Message, tc.why) || !strings.Contains(r.Message, "--target-allow") {
			t.Errorf("%s: %d %s %q, want 400 target.url saying %s", tc.url, r.Status, r.field(), r.Message, tc.why)
		}
	}
	// Allowed anyway, and host names (checked at dial time) pass.
	for i, u := range []string{"http://127.0.0.2:9/hook", "http://10.9.1.1/", "https://hooks.example.com/"} {
		e.createSchedule(body("ok"+string(rune('a'+i)), u))
	}
	// PATCH is checked too, and changes nothing.
	id := e.createSchedule(body("patched", "https://hooks.example.com/a"))
	r := e.do("PATCH", "/api/schedules/"+id, map[string]any{"target": map[string]any{"url": "http://localhost:6060/debug"}})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "target.url" {
		t.Errorf("PATCH: field %q (%s)", r.field(), r.Message)
	}
	s, err := e.store.ScheduleGet(context.Background(), id)
	if err != nil || s.Target.URL != "https://hooks.example.com/a" {
		t.Fatalf("after a refused PATCH: %+v, %v", s.Target, err)
	}
}

// Target header values are stored but shown as "***" everywhere the API
// shows a schedule; a PATCH that sends "***" keeps the stored value.
func TestScheduleTargetHeadersMasked(t *testing.T) {
	t.Parallel()
	e := setupSchedules(t)
	ctx := context.Background()
	id := e.createSchedule(map[string]any{"name": "hook", "kind": "k", "task": 1, "cron_expr": "@daily",
		"target": map[string]any{"url": "https://hooks.example.com/", "headers": map[string]string{"Authorization": "Bearer s3cret-token", "X-Key": "key-one"}}})
	masked := map[string]string{"Authorization": "***", "X-Key": "***"}
	stored := func() map[string]string {
		t.Helper()
		s, err := e.store.ScheduleGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Target.Headers
	}
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer s3cret-token", "X-Key": "key-one"}, stored()); diff != "" {
		t.Fatalf("stored headers (-want +got):\n%s", diff)
	}
	var got scheduleJSON
	e.ok("GET", "/api/schedules/"+id, nil, &got)
	if diff := cmp.Diff(masked, got.Target.Headers); diff != "" {
		t.Errorf("GET headers (-want +got):\n%s", diff)
	}
	for _, path := range []string{"/api/schedules", "/api/schedules/" + id, "/api/schedules/hook"} {
		if r := e.do("GET", path, nil); r.Status != 200 || strings.Contains(string(r.Data), "s3cret") || strings.Contains(string(r.Data), "key-one") {
			t.Errorf("GET %s shows a header value: %s", path, r.Data)
		}
	}
	// PATCH: "***" keeps (also under another spelling of the name), a new
	// value replaces, an absent header goes.
	var up scheduleJSON
	e.ok("PATCH", "/api/schedules/"+id, map[string]any{"target": map[string]any{"url": "https://hooks.example.com/v2",
		"headers": map[string]string{"authorization": "***", "X-New": "n3w-value"}}}, &up)
	if diff := cmp.Diff(map[string]string{"authorization": "***", "X-New": "***"}, up.Target.Headers); diff != "" {
		t.Errorf("PATCH response headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"authorization": "Bearer s3cret-token", "X-New": "n3w-value"}, stored()); diff != "" {
		t.Errorf("stored after PATCH (-want +got):\n%s", diff)
	}
	// Sending back what GET showed changes nothing (a client's
	// read-modify-write).
	e.ok("PATCH", "/api/schedules/"+id, map[string]any{"target": up.Target}, &up)
	if diff := cmp.Diff(map[string]string{"authorization": "Bearer s3cret-token", "X-New": "n3w-value"}, stored()); diff != "" {
		t.Errorf("stored after a round trip (-want +got):\n%s", diff)
	}
	// "***" for a header the schedule does not have, or on create: 400.
	r := e.do("PATCH", "/api/schedules/"+id, map[string]any{"target": map[string]any{"url": "https://h.example/", "headers": map[string]string{"X-Other": "***"}}})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "target.headers" {
		t.Errorf("PATCH unknown ***: field %q (%s)", r.field(), r.Message)
	}
	r = e.do("POST", "/api/schedules", map[string]any{"name": "new", "kind": "k", "task": 1, "cron_expr": "@daily",
		"target": map[string]any{"url": "https://h.example/", "headers": map[string]string{"X-Key": "***"}}})
	wantErr(t, r, rota.CodeInvalid)
	if r.field() != "target.headers" {
		t.Errorf("create with ***: field %q (%s)", r.field(), r.Message)
	}
	// The request log (debug level: every request) shows no value either.
	if logs := e.logs.String(); strings.Contains(logs, "s3cret") || strings.Contains(logs, "key-one") || strings.Contains(logs, "n3w-value") {
		t.Errorf("logs show a header value:\n%s", logs)
	}
}
