package rotaclient_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota/rotaclient"
)

func TestClaimDecodesStartAndServerTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		task        string
		server      string
		wantStarted time.Time
		wantServer  time.Time
	}{
		{"milliseconds", `"started_at":1700000000,"started_at_ms":1700000000250`, `,"server_time_ms":1700000000300`,
			time.UnixMilli(1700000000250).UTC(), time.UnixMilli(1700000000300).UTC()},
		{"seconds only", `"started_at":1700000000`, ``, time.Unix(1700000000, 0).UTC(), time.Time{}},
		{"older server", `"lease_expires_at":1700000030`, ``, time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newFake(t, 200, `{"code":0,"message":"ok","data":{"drain":false`+tt.server+`,"tasks":[{"task_id":"t","run_id":"r",
				"kind":"k","priority":"mid","task":1,"attempt":1,"heartbeat_timeout_seconds":30,"timeout_seconds":2,`+tt.task+`}]}}`)
			res, err := c.Claim(context.Background(), rotaclient.ClaimParams{WorkerID: "w", Kinds: []string{"k"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Runs) != 1 {
				t.Fatalf("runs %+v", res.Runs)
			}
			got := res.Runs[0]
			if !got.StartedAt.Equal(tt.wantStarted) || !res.ServerTime.Equal(tt.wantServer) {
				t.Errorf("started %v, server time %v; want %v, %v", got.StartedAt, res.ServerTime, tt.wantStarted, tt.wantServer)
			}
		})
	}
}

func TestHeartbeatWaitSendsWait(t *testing.T) {
	t.Parallel()
	f, c := newFake(t, 200, `{"code":0,"message":"ok","data":{"stop":true,"drain":false,"lease_expires_at":1700000030,"heartbeat_timeout_seconds":30}}`)
	res, err := c.HeartbeatWait(context.Background(), "r1", "w", 10*time.Second+500*time.Millisecond)
	if err != nil || !res.Stop {
		t.Fatalf("HeartbeatWait: %+v, %v", res, err)
	}
	if _, err := c.Heartbeat(context.Background(), "r1", "w", "note"); err != nil {
		t.Fatal(err)
	}
	var bodies []map[string]any
	for i, r := range f.got {
		if r.URL.Path != "/prefix/api/runs/r1/heartbeat" {
			t.Errorf("path %s", r.URL.Path)
		}
		var m map[string]any
		if err := json.Unmarshal(f.bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, m)
	}
	want := []map[string]any{{"worker_id": "w", "wait_seconds": 10.0}, {"worker_id": "w", "message": "note"}}
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
}
