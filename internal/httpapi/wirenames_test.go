package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rotahq/rota/rotaapi"
)

// The names this package's tests give the API's JSON shapes, which they
// decode responses into: the shapes themselves are package rotaapi's.
type (
	taskJSON             = rotaapi.Task
	claimedJSON          = rotaapi.ClaimedRun
	kindJSON             = rotaapi.Kind
	workerJSON           = rotaapi.Worker
	scheduleJSON         = rotaapi.Schedule
	listResponse         = rotaapi.TaskList
	submitResponse       = rotaapi.SubmitResponse
	batchResponse        = rotaapi.BatchSubmitResponse
	heartbeatResponse    = rotaapi.HeartbeatResponse
	kindsResponse        = rotaapi.KindList
	workersResponse      = rotaapi.WorkerList
	statsResponse        = rotaapi.Stats
	healthResponse       = rotaapi.Health
	scheduleIDResponse   = rotaapi.ScheduleIDResponse
	scheduleListResponse = rotaapi.ScheduleList
	scheduleRunsResponse = rotaapi.ScheduleRunList
	triggerResponse      = rotaapi.TriggerResponse
	fireTimesResponse    = rotaapi.FireTimes
	backfillResponse     = rotaapi.BackfillResponse
)

// taskDetailJSON is rotaapi.TaskDetail with its task under the name the
// tests use (got.taskJSON); TestTaskDetailJSON checks that the two agree.
type taskDetailJSON struct {
	taskJSON
	Runs       []rotaapi.Run `json:"runs"`
	DependsOn  []string      `json:"depends_on"`
	Dependents []string      `json:"dependents"`
}

func TestTaskDetailJSON(t *testing.T) {
	t.Parallel()
	want := rotaapi.TaskDetail{
		Task: rotaapi.Task{TaskID: "t", Kind: "k", Task: json.RawMessage(`{"a":1}`), Result: json.RawMessage(`null`),
			WorkerIDs: []string{"w"}, CreatedAt: 1700000000},
		Runs:      []rotaapi.Run{{RunID: "r", TaskID: "t", Attempt: 1, StartTime: 1700000001}},
		DependsOn: []string{"p"}, Dependents: []string{"c"},
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var mine taskDetailJSON
	if err := decodeStrict(b, &mine, ""); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	back, err := json.Marshal(mine)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), string(back)); diff != "" {
		t.Errorf("taskDetailJSON and rotaapi.TaskDetail disagree (-rotaapi +test):\n%s", diff)
	}
}
