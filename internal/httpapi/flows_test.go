package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
)

// payloadName reads {"name": ...} from a task payload.
func payloadName(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var p struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("payload %s: %v", raw, err)
	}
	return p.Name
}

// TestPriorityVector reproduces the documented weighted order: 9 tasks per level,
// priority factor 2, one worker taking one task at a time.
func TestPriorityVector(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var k kindJSON
	e.ok("PUT", "/api/kinds/prio", map[string]any{"priority_factor": 2}, &k)
	if k.PriorityFactor != 2 {
		t.Fatalf("priority_factor = %d", k.PriorityFactor)
	}
	for i := 1; i <= 9; i++ {
		for _, p := range []string{"low", "mid", "high"} {
			e.submit(map[string]any{"kind": "prio", "priority": p, "task": map[string]any{"name": fmt.Sprintf("%s_%d", p, i)}})
		}
	}
	var got []string
	for range 27 {
		c := e.claimOne("w1", "prio", 0)
		got = append(got, payloadName(t, c.Task))
		if r := e.succeed(c.RunID, "w1"); r.Status != rota.StatusSuccess {
			t.Fatalf("succeed: %+v", r)
		}
	}
	want := strings.Split("high_1,high_2,high_3,high_4,mid_1,mid_2,low_1,"+
		"high_5,high_6,high_7,high_8,mid_3,mid_4,low_2,"+
		"high_9,mid_5,mid_6,low_3,"+
		"mid_7,mid_8,low_4,"+
		"mid_9,low_5,"+
		"low_6,low_7,low_8,low_9", ",")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("claim order (-want +got):\n%s", diff)
	}
	if c := e.claim("w1", []string{"prio"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("a 28th claim got %+v", c.Tasks)
	}
}

// TestIdempotentConcurrentSubmits sends 50 identical keyed submits at once:
// one task, one id in all answers.
func TestIdempotentConcurrentSubmits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := map[string]any{"kind": "idem", "key": "order-42", "task": map[string]any{"n": 42}}
	const n = 50
	type answer struct {
		id       string
		existing bool
		err      error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := sendRequest(e.url, "POST", "/api/tasks", body)
			if err == nil && (r.Status != http.StatusOK || r.Code != 0) {
				err = fmt.Errorf("submit: %v", r)
			}
			var d struct {
				TaskID   string `json:"task_id"`
				Existing bool   `json:"existing"`
			}
			if err == nil {
				err = json.Unmarshal(r.Data, &d)
			}
			answers[i] = answer{d.TaskID, d.Existing, err}
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("submit %d: %v", i, a.err)
		}
		if a.id != answers[0].id {
			t.Fatalf("submit %d got id %s, submit 0 got %s", i, a.id, answers[0].id)
		}
		if !a.existing {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d answers say they created the task, want 1", created)
	}
	var list listResponse
	e.ok("GET", "/api/tasks?key=order-42", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != answers[0].id {
		t.Fatalf("list by key: %+v", list.Tasks)
	}

	// A finished task keeps its key: the same submit answers it, no new run.
	c := e.claimOne("w1", "idem", 0)
	e.succeed(c.RunID, "w1")
	var out rotaapi.SubmitResponse
	e.ok("POST", "/api/tasks", body, &out)
	if out != (rotaapi.SubmitResponse{TaskID: answers[0].id, Existing: true}) {
		t.Fatalf("submit of a finished task's key: %+v, want existing %s", out, answers[0].id)
	}
	if got := e.claim("w1", []string{"idem"}, 1, 0); len(got.Tasks) != 0 {
		t.Fatalf("a claim after the repeated submit got %+v", got.Tasks)
	}
	e.ok("GET", "/api/tasks?key=order-42", nil, &list)
	if len(list.Tasks) != 1 {
		t.Fatalf("list by key after the repeated submit: %d tasks, want 1", len(list.Tasks))
	}
}

// TestRerunIfFinished: a keyed submit with rerun_if_finished runs a
// finished task again under its id (single and batch), never disturbs an
// unfinished one, and needs a key.
func TestRerunIfFinished(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := map[string]any{"kind": "rerun", "key": "k", "task": map[string]any{"n": 1}, "rerun_if_finished": true}
	id := e.submit(body)
	var out rotaapi.SubmitResponse
	// While it waits or runs, a rerun submit answers it as it is.
	e.ok("POST", "/api/tasks", body, &out)
	if out != (rotaapi.SubmitResponse{TaskID: id, Existing: true}) {
		t.Fatalf("rerun submit while scheduled: %+v", out)
	}
	c := e.claimOne("w1", "rerun", 0)
	e.ok("POST", "/api/tasks", body, &out)
	if out != (rotaapi.SubmitResponse{TaskID: id, Existing: true}) {
		t.Fatalf("rerun submit while running: %+v", out)
	}
	if hb := e.heartbeat(c.RunID, "w1"); hb.Stop {
		t.Fatalf("the running run was asked to stop by a rerun submit")
	}
	e.succeed(c.RunID, "w1")

	e.ok("POST", "/api/tasks", body, &out)
	if out != (rotaapi.SubmitResponse{TaskID: id, Existing: true, Rerun: true}) {
		t.Fatalf("rerun submit after success: %+v, want rerun of %s", out, id)
	}
	if task := e.task(id); task.Status != rota.StatusScheduled || len(task.Runs) != 0 {
		t.Fatalf("rerun task: status %s, %d runs; want SCHEDULED, none", task.Status, len(task.Runs))
	}
	c = e.claimOne("w1", "rerun", 0)
	if c.TaskID != id {
		t.Fatalf("claimed %s, want the rerun task %s", c.TaskID, id)
	}
	e.succeed(c.RunID, "w1")

	var batch rotaapi.BatchSubmitResponse
	e.ok("POST", "/api/tasks/batch", map[string]any{"tasks": []any{body, body}}, &batch)
	want := []rotaapi.SubmitResult{{TaskID: id, Existing: true, Rerun: true}, {TaskID: id, Existing: true}}
	if diff := cmp.Diff(want, batch.Results); diff != "" {
		t.Fatalf("batch of two reruns (-want +got):\n%s", diff)
	}

	r := e.do("POST", "/api/tasks", map[string]any{"kind": "rerun", "task": 1, "rerun_if_finished": true})
	wantErr(t, r, rota.CodeInvalid)
	if f := r.field(); f != "rerun_if_finished" {
		t.Fatalf("rerun without a key: field %q, want rerun_if_finished", f)
	}
	r = e.do("POST", "/api/tasks/batch", map[string]any{"tasks": []any{map[string]any{"kind": "rerun", "task": 1, "rerun_if_finished": true}}})
	wantErr(t, r, rota.CodeInvalid)
	if f := r.field(); f != "tasks[0].rerun_if_finished" {
		t.Fatalf("rerun without a key in a batch: field %q", f)
	}
}

// TestLeaseTakeover: worker A claims and goes silent; once its lease lapses
// the reaper lets worker B take the task; A's late reports (after B's
// success) get 409 and change nothing.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "lease", "task": 1, "heartbeat_timeout_seconds": 1})
	a := e.claimOne("A", "lease", 0)
	if a.TaskID != id || a.Attempt != 1 || a.HeartbeatTimeoutSeconds != 1 {
		t.Fatalf("A claimed %+v", a)
	}
	start := time.Now()
	b := e.claimOne("B", "lease", 5) // waits for the reaper
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("takeover took %v", waited)
	}
	if b.TaskID != id || b.Attempt != 2 {
		t.Fatalf("B claimed %+v", b)
	}
	// B beats and reports at once: its lease is 1 s too, and on a loaded
	// machine (-race, two contended cores) A's three late reports and a
	// read took longer than that between B's claim and its heartbeat.
	if hb := e.heartbeat(b.RunID, "B"); hb.Stop || hb.Drain {
		t.Fatalf("B's heartbeat: %+v", hb)
	}
	got := e.task(id)
	if got.Status != rota.StatusRunning || len(got.Runs) != 2 || got.Runs[1].WorkerID != "B" || got.Runs[1].Status != rota.StatusRunning {
		t.Fatalf("after B's claim: %s %+v", got.Status, got.Runs)
	}
	if r := e.succeed(b.RunID, "B"); r.Status != rota.StatusSuccess || r.RunStatus != rota.StatusSuccess {
		t.Fatalf("B's success: %+v", r)
	}
	for _, path := range []string{"/heartbeat", "/succeed", "/fail"} {
		r := e.do("POST", "/api/runs/"+a.RunID+path, map[string]any{"worker_id": "A"})
		wantErr(t, r, rota.CodeLeaseLost)
	}
	got = e.task(id)
	var statuses []rota.Status
	for _, r := range got.Runs {
		statuses = append(statuses, r.Status)
	}
	if diff := cmp.Diff([]rota.Status{rota.StatusTimeout, rota.StatusSuccess}, statuses); diff != "" {
		t.Fatalf("run statuses (-want +got):\n%s", diff)
	}
	if got.Status != rota.StatusSuccess || !got.IsSucceed || got.EndTime == 0 || got.WorkerAddress != "127.0.0.1" {
		t.Fatalf("task: %+v", got.taskJSON)
	}
}

// TestClaimWokenBySubmit: a waiting claim returns as soon as a task is
// submitted, not at its safety poll.
func TestClaimWokenBySubmit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.SafetyPoll = time.Minute })
	type result struct {
		r   apiResp
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := sendRequest(e.url, "POST", "/api/workers/claim", map[string]any{"worker_id": "waiter", "kinds": []string{"wake"}, "wait_seconds": 10, "follow": true})
		done <- result{r, time.Now(), err}
	}()
	// The claim registers as a waiter before it records the worker.
	waitFor(t, 5*time.Second, "the claim to wait", func() bool { return e.workerStatus("waiter") != "" })
	time.Sleep(50 * time.Millisecond)
	id := e.submit(map[string]any{"kind": "wake", "task": 1})
	submitted := time.Now()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
		var c claimed
		if err := json.Unmarshal(res.r.Data, &c); err != nil || len(c.Tasks) != 1 || c.Tasks[0].TaskID != id {
			t.Fatalf("claim: %v", res.r)
		}
		// Typically a few milliseconds; the bound leaves room for a loaded
		// machine running -race beside the e2e tests (1.4 s seen) while
		// staying below the wait (10s) and far below the safety poll
		// (1 min), so only a wake-up can meet it.
		lag := res.at.Sub(submitted)
		t.Logf("the claim returned %v after the submit", lag)
		if lag > 5*time.Second {
			t.Fatalf("the claim returned %v after the submit", lag)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("the waiting claim was not woken by the submit")
	}
}

// TestDelayedTask: a task with delay_seconds is not claimable before its
// time, and a waiting claim gets it when it comes.
func TestDelayedTask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "later", "task": 1, "delay_seconds": 1})
	got := e.task(id)
	if got.RunAt < got.CreatedAt+1 || got.Status != rota.StatusScheduled {
		t.Fatalf("run_at %d, created_at %d, status %s", got.RunAt, got.CreatedAt, got.Status)
	}
	st, err := e.store.TaskGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c := e.claim("w1", []string{"later"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("claimed a delayed task early: %+v", c.Tasks)
	}
	c := e.claimOne("w1", "later", 5)
	if now := time.Now(); now.Before(st.RunAt) {
		t.Fatalf("claimed at %v, before run_at %v", now, st.RunAt)
	}
	if c.TaskID != id {
		t.Fatalf("claimed %s, want %s", c.TaskID, id)
	}

	// run_at in the past means now.
	past := e.submit(map[string]any{"kind": "past", "task": 1, "run_at": 1})
	if c := e.claimOne("w1", "past", 0); c.TaskID != past {
		t.Fatalf("claimed %s", c.TaskID)
	}
}

// TestStop stops a waiting task (CANCELED at once) and a running one (told
// through its heartbeat, CANCELED when its worker reports).
func TestStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	waiting := e.submit(map[string]any{"kind": "stop", "task": 1})
	var got taskDetailJSON
	e.ok("POST", "/api/tasks/stop/"+waiting, nil, &got)
	if got.Status != rota.StatusCanceled || got.EndTime == 0 || got.TaskID != waiting {
		t.Fatalf("stopped waiting task: %+v", got.taskJSON)
	}
	if c := e.claim("w1", []string{"stop"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("claimed a canceled task")
	}
	wantErr(t, e.do("POST", "/api/tasks/stop/"+waiting, nil), rota.CodeConflict)

	running := e.submit(map[string]any{"kind": "stop", "task": 2, "heartbeat_timeout_seconds": 60})
	c := e.claimOne("w1", "stop", 0)
	e.ok("POST", "/api/tasks/stop/"+running, map[string]any{"message": "operator said so"}, &got)
	if got.Status != rota.StatusRunning || got.Message != "operator said so" {
		t.Fatalf("stopped running task: %s %q", got.Status, got.Message)
	}
	e.ok("POST", "/api/tasks/stop/"+running, "{}", nil) // stopping twice is fine
	if hb := e.heartbeat(c.RunID, "w1"); !hb.Stop {
		t.Fatalf("heartbeat of a stopped task: %+v", hb)
	}
	if r := e.fail(c.RunID, "w1"); r.Status != rota.StatusCanceled || r.RunStatus != rota.StatusCanceled {
		t.Fatalf("report of a stopped run: %+v", r)
	}
	if got := e.task(running); got.Status != rota.StatusCanceled || got.Runs[0].Status != rota.StatusCanceled {
		t.Fatalf("task %s, run %s", got.Status, got.Runs[0].Status)
	}
}

// TestPatch changes options of a waiting task, and narrowing worker_ids
// stops the run of a worker no longer allowed.
func TestPatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "patch", "task": 1, "worker_ids": []string{"A", "B"}, "heartbeat_timeout_seconds": 60})
	var got taskDetailJSON
	e.ok("PATCH", "/api/tasks/"+id, map[string]any{"priority": "high", "max_retries": 7, "heartbeat_timeout_seconds": 90}, &got)
	if got.Priority != rota.PriorityHigh || got.MaxRetries != 7 || got.HeartbeatTimeoutSeconds != 90 ||
		!slices.Equal(got.WorkerIDs, []string{"A", "B"}) {
		t.Fatalf("patched: %+v", got.taskJSON)
	}
	if c := e.claim("C", []string{"patch"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("C is not allowed but claimed")
	}
	a := e.claimOne("A", "patch", 0)
	e.ok("PATCH", "/api/tasks/"+id, map[string]any{"worker_ids": []string{"B"}}, &got)
	if !slices.Equal(got.WorkerIDs, []string{"B"}) || !got.Runs[0].StopRequested {
		t.Fatalf("narrowed: worker_ids %v, runs %+v", got.WorkerIDs, got.Runs)
	}
	if hb := e.heartbeat(a.RunID, "A"); !hb.Stop {
		t.Fatalf("A's heartbeat after narrowing: %+v", hb)
	}
	if r := e.fail(a.RunID, "A"); r.RunStatus != rota.StatusCanceled || r.Status != rota.StatusScheduled {
		t.Fatalf("A's report after narrowing: %+v", r)
	}
	if c := e.claim("A", []string{"patch"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("A claimed again after being removed")
	}
	b := e.claimOne("B", "patch", 0)
	if r := e.succeed(b.RunID, "B"); r.Status != rota.StatusSuccess {
		t.Fatalf("B: %+v", r)
	}
	// worker_ids [] allows any worker; a finished task cannot change.
	wantErr(t, e.do("PATCH", "/api/tasks/"+id, map[string]any{"worker_ids": []string{}}), rota.CodeConflict)
}

// TestMultiWorker: a task with workers 2 is run by two distinct workers,
// never twice at once or twice successfully by one; a worker whose run
// failed may run it again.
func TestMultiWorker(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.BackoffBase = 10 * time.Millisecond })
	id := e.submit(map[string]any{"kind": "multi", "task": 1, "workers": 2, "heartbeat_timeout_seconds": 60})
	a := e.claimOne("A", "multi", 0)
	if c := e.claim("A", []string{"multi"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("A holds two runs of one task")
	}
	b := e.claimOne("B", "multi", 0)
	if c := e.claim("C", []string{"multi"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("a third worker ran a task of workers 2")
	}
	// A fails and may retry; the task keeps running under B meanwhile.
	if r := e.fail(a.RunID, "A"); r.Status != rota.StatusRunning {
		t.Fatalf("after A's failure: %+v", r)
	}
	a2 := e.claimOne("A", "multi", 5)
	if a2.TaskID != id || a2.Attempt != 3 {
		t.Fatalf("A's retry: %+v", a2)
	}
	if r := e.succeed(a2.RunID, "A"); r.Status != rota.StatusRunning {
		t.Fatalf("after A's success: %+v", r)
	}
	if c := e.claim("A", []string{"multi"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("A succeeded and claimed again")
	}
	wantErr(t, e.do("POST", "/api/runs/"+a2.RunID+"/succeed", map[string]any{"worker_id": "A"}), rota.CodeLeaseLost)
	if r := e.succeed(b.RunID, "B"); r.Status != rota.StatusSuccess {
		t.Fatalf("after B's success: %+v", r)
	}
	got := e.task(id)
	var runs []string
	for _, r := range got.Runs {
		runs = append(runs, r.WorkerID+":"+string(r.Status))
	}
	if diff := cmp.Diff([]string{"A:FAILED", "B:SUCCESS", "A:SUCCESS"}, runs); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
}

// TestPauseResume: a paused kind accepts tasks but hands none out;
// resuming wakes a waiting claim.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.SafetyPoll = time.Minute })
	var k kindJSON
	e.ok("POST", "/api/kinds/pz/pause", nil, &k)
	if !k.Paused || k.Kind != "pz" {
		t.Fatalf("pause: %+v", k)
	}
	id := e.submit(map[string]any{"kind": "pz", "task": 1})
	if c := e.claim("w1", []string{"pz"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("claimed from a paused kind")
	}
	var st statsResponse
	e.ok("GET", "/api/stats", nil, &st)
	if len(st.Kinds) != 1 || !st.Kinds[0].Paused {
		t.Fatalf("stats of a paused kind: %+v", st.Kinds)
	}
	done := make(chan apiResp, 1)
	go func() {
		r, _ := sendRequest(e.url, "POST", "/api/workers/claim", map[string]any{"worker_id": "w2", "kinds": []string{"pz"}, "wait_seconds": 10})
		done <- r
	}()
	waitFor(t, 5*time.Second, "the claim to wait", func() bool { return e.workerStatus("w2") != "" })
	e.ok("POST", "/api/kinds/pz/resume", "", &k)
	if k.Paused {
		t.Fatalf("resume: %+v", k)
	}
	select {
	case r := <-done:
		var c claimed
		if err := json.Unmarshal(r.Data, &c); err != nil || len(c.Tasks) != 1 || c.Tasks[0].TaskID != id {
			t.Fatalf("claim after resume: %v", r)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("resume did not wake the waiting claim")
	}
}

// TestKinds: PUT creates and partially updates; GET lists and reads.
func TestKinds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var k kindJSON
	e.ok("PUT", "/api/kinds/mail", map[string]any{"max_running": 5}, &k)
	want := kindJSON{Kind: "mail", PriorityFactor: rota.DefaultPriorityFactor, MaxRunning: 5, Dispatch: rota.DispatchPull}
	if k != want {
		t.Fatalf("created: %+v, want %+v", k, want)
	}
	e.ok("PUT", "/api/kinds/mail", map[string]any{"priority_factor": 10, "rate": 2.5, "retention_seconds": 3600, "paused": true}, &k)
	want = kindJSON{Kind: "mail", PriorityFactor: 10, Paused: true, MaxRunning: 5, Rate: 2.5, RetentionSeconds: 3600, Dispatch: rota.DispatchPull}
	if k != want {
		t.Fatalf("updated: %+v, want %+v", k, want)
	}
	e.ok("GET", "/api/kinds/mail", nil, &k)
	if k != want {
		t.Fatalf("read: %+v, want %+v", k, want)
	}
	e.submit(map[string]any{"kind": "alpha", "task": 1})
	var list kindsResponse
	e.ok("GET", "/api/kinds", nil, &list)
	var names []string
	for _, k := range list.Kinds {
		names = append(names, k.Kind)
	}
	if !slices.Equal(names, []string{"alpha", "mail"}) {
		t.Fatalf("kinds: %v", names)
	}
}

// TestRemoteWorkerStop: stopping a worker answers its waiting claim with
// drain at once, and its status becomes "stopped" once it holds no runs.
func TestRemoteWorkerStop(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.SafetyPoll = time.Minute })
	done := make(chan apiResp, 1)
	go func() {
		r, _ := sendRequest(e.url, "POST", "/api/workers/claim", map[string]any{"worker_id": "idle", "kinds": []string{"rs"}, "wait_seconds": 10})
		done <- r
	}()
	waitFor(t, 5*time.Second, "the claim to wait", func() bool { return e.workerStatus("idle") == rota.WorkerActive })
	var w workerJSON
	e.ok("POST", "/api/workers/idle/stop", nil, &w)
	if !w.StopRequested || w.WorkerID != "idle" {
		t.Fatalf("stop: %+v", w)
	}
	select {
	case r := <-done:
		var c claimed
		if err := json.Unmarshal(r.Data, &c); err != nil || !c.Drain || len(c.Tasks) != 0 {
			t.Fatalf("claim of a stopped worker: %v", r)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("stopping the worker did not end its waiting claim")
	}
	if s := e.workerStatus("idle"); s != rota.WorkerStopped {
		t.Fatalf("status %q, want stopped", s)
	}
	if c := e.claim("idle", []string{"rs"}, 1, 0); !c.Drain {
		t.Fatalf("a later claim: %+v", c)
	}

	// A busy worker drains: its heartbeat says so, and it is stopped once
	// its run ends.
	e.submit(map[string]any{"kind": "rs", "task": 1, "heartbeat_timeout_seconds": 60})
	run := e.claimOne("busy", "rs", 0)
	e.ok("POST", "/api/workers/busy/stop", nil, nil)
	if s := e.workerStatus("busy"); s != rota.WorkerActive {
		t.Fatalf("busy worker status %q, want active while it runs", s)
	}
	if hb := e.heartbeat(run.RunID, "busy"); !hb.Drain || hb.Stop {
		t.Fatalf("heartbeat of a draining worker: %+v", hb)
	}
	e.succeed(run.RunID, "busy")
	if s := e.workerStatus("busy"); s != rota.WorkerStopped {
		t.Fatalf("status %q, want stopped", s)
	}
}

// TestRetries: max_retries 1 means two runs, then FAILED; retry false fails
// at once.
func TestRetries(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.dispatch.BackoffBase = 10 * time.Millisecond })
	id := e.submit(map[string]any{"kind": "retry", "task": 1, "max_retries": 1})
	c := e.claimOne("w1", "retry", 0)
	if r := e.fail(c.RunID, "w1"); r.Status != rota.StatusScheduled || r.RunStatus != rota.StatusFailed {
		t.Fatalf("first failure: %+v", r)
	}
	c = e.claimOne("w1", "retry", 5)
	if c.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", c.Attempt)
	}
	if r := e.fail(c.RunID, "w1"); r.Status != rota.StatusFailed {
		t.Fatalf("second failure: %+v", r)
	}
	got := e.task(id)
	if got.Status != rota.StatusFailed || got.IsSucceed || got.EndTime == 0 || len(got.Runs) != 2 || got.Message != "boom" {
		t.Fatalf("task %+v runs %+v", got.taskJSON, got.Runs)
	}
	if c := e.claim("w1", []string{"retry"}, 1, 0); len(c.Tasks) != 0 {
		t.Fatalf("claimed a failed task")
	}

	id = e.submit(map[string]any{"kind": "retry", "task": 2})
	c = e.claimOne("w1", "retry", 0)
	var r report
	e.ok("POST", "/api/runs/"+c.RunID+"/fail", map[string]any{"worker_id": "w1", "retry": false}, &r)
	if r.Status != rota.StatusFailed || r.TaskID != id {
		t.Fatalf("fail without retry: %+v", r)
	}
}

// TestStats counts tasks by kind with every status present.
func TestStats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 3 {
		e.submit(map[string]any{"kind": "s1", "task": i, "heartbeat_timeout_seconds": 60})
	}
	e.submit(map[string]any{"kind": "s2", "task": 1})
	done := e.claimOne("w1", "s1", 0)
	e.succeed(done.RunID, "w1")
	e.claimOne("w1", "s1", 0)
	var st statsResponse
	e.ok("GET", "/api/stats", nil, &st)
	want := map[string]map[rota.Status]int{
		"s1": {rota.StatusScheduled: 1, rota.StatusRunning: 1, rota.StatusSuccess: 1},
		"s2": {rota.StatusScheduled: 1},
	}
	if len(st.Kinds) != 2 {
		t.Fatalf("kinds: %+v", st.Kinds)
	}
	for _, k := range st.Kinds {
		if len(k.Counts) != len(rota.Statuses()) {
			t.Errorf("%s: counts %v lack statuses", k.Kind, k.Counts)
		}
		for _, s := range rota.Statuses() {
			if k.Counts[s] != want[k.Kind][s] {
				t.Errorf("%s %s = %d, want %d", k.Kind, s, k.Counts[s], want[k.Kind][s])
			}
		}
		if k.OldestWaitingSeconds < 0 || k.Paused {
			t.Errorf("%s: %+v", k.Kind, k)
		}
	}
	wantTotals := map[rota.Status]int{}
	for _, s := range rota.Statuses() {
		wantTotals[s] = 0
	}
	wantTotals[rota.StatusScheduled], wantTotals[rota.StatusRunning], wantTotals[rota.StatusSuccess] = 2, 1, 1
	if diff := cmp.Diff(wantTotals, st.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
}

// TestPagination walks 25 tasks in pages of 10, newest first, and checks
// that a task submitted meanwhile does not shift the pages.
func TestPagination(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var b batchResponse
	items := make([]map[string]any, 25)
	for i := range items {
		items[i] = map[string]any{"kind": "page", "task": i}
	}
	e.ok("POST", "/api/tasks/batch", map[string]any{"tasks": items}, &b)
	var want []string
	for i := len(b.Results) - 1; i >= 0; i-- {
		want = append(want, b.Results[i].TaskID)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		var l listResponse
		e.ok("GET", "/api/tasks?kind=page&limit=10&cursor="+cursor, nil, &l)
		for _, task := range l.Tasks {
			got = append(got, task.TaskID)
		}
		if page == 0 {
			e.submit(map[string]any{"kind": "page", "task": "late"})
		}
		if l.NextCursor == "" {
			if len(l.Tasks) != 5 {
				t.Fatalf("last page has %d tasks", len(l.Tasks))
			}
			break
		}
		if len(l.Tasks) != 10 || page > 2 {
			t.Fatalf("page %d has %d tasks, next_cursor %q", page, len(l.Tasks), l.NextCursor)
		}
		cursor = l.NextCursor
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
	var l listResponse
	e.ok("GET", "/api/tasks?kind=page&status=scheduled", nil, &l)
	if len(l.Tasks) != 26 || l.NextCursor != "" {
		t.Fatalf("default page: %d tasks, next_cursor %q", len(l.Tasks), l.NextCursor)
	}
	e.ok("GET", "/api/tasks?kind=page&status=RUNNING", nil, &l)
	if l.Tasks == nil || len(l.Tasks) != 0 {
		t.Fatalf("empty page: %+v", l.Tasks)
	}
}

// TestBatch: results in order, keys deduped within the batch too.
func TestBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var b batchResponse
	e.ok("POST", "/api/tasks/batch", map[string]any{"tasks": []map[string]any{
		{"kind": "bt", "task": 1, "key": "k"},
		{"kind": "bt", "task": 2, "key": "k"},
		{"kind": "bt", "task": 3, "priority": "high"},
	}}, &b)
	if len(b.Results) != 3 || b.Results[0].Existing || !b.Results[1].Existing || b.Results[1].TaskID != b.Results[0].TaskID ||
		b.Results[2].Existing || b.Results[2].TaskID == b.Results[0].TaskID {
		t.Fatalf("results: %+v", b.Results)
	}
	if got := e.task(b.Results[2].TaskID); got.Priority != rota.PriorityHigh || string(got.Task) != "3" {
		t.Fatalf("third task: %+v", got.taskJSON)
	}
	var again submitResponse
	e.ok("POST", "/api/tasks", map[string]any{"kind": "bt", "task": 9, "key": "k"}, &again)
	if again.TaskID != b.Results[0].TaskID || !again.Existing {
		t.Fatalf("keyed submit after batch: %+v", again)
	}
}

// TestRunAgain copies a finished task's kind, priority, payload and
// options, without its key.
func TestRunAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{
		"kind": "again", "priority": "high", "task": map[string]any{"x": []int{1, 2}}, "key": "k1",
		"max_retries": 5, "timeout_seconds": 100, "heartbeat_timeout_seconds": 40, "worker_ids": []string{"w1", "w2"}, "workers": 2,
	})
	for _, w := range []string{"w1", "w2"} {
		c := e.claimOne(w, "again", 0)
		e.succeed(c.RunID, w)
	}
	var out submitResponse
	e.ok("POST", "/api/tasks/run_again/"+id, nil, &out)
	if out.TaskID == id || !rota.ValidID(out.TaskID) {
		t.Fatalf("run_again: %+v", out)
	}
	old, cp := e.task(id), e.task(out.TaskID)
	if cp.Status != rota.StatusScheduled || cp.Key != "" || len(cp.Runs) != 0 || cp.Attempt != 0 {
		t.Fatalf("copy: %+v", cp.taskJSON)
	}
	ignore := func(t taskJSON) taskJSON {
		t.TaskID, t.Key, t.Status, t.Attempt, t.CreatedAt, t.RunAt, t.StartTime, t.EndTime = "", "", "", 0, 0, 0, 0, 0
		t.WorkerAddress, t.IsSucceed, t.Message, t.Result = "", false, "", nil
		return t
	}
	if diff := cmp.Diff(ignore(old.taskJSON), ignore(cp.taskJSON)); diff != "" {
		t.Fatalf("copy differs (-old +copy):\n%s", diff)
	}
}

// TestTaskShape checks the exact JSON of a task and of its runs.
func TestTaskShape(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "shape", "task": map[string]any{"to": "a@b.c"}})
	fresh := e.do("GET", "/api/tasks/"+id, nil)
	var m map[string]any
	if err := json.Unmarshal(fresh.Data, &m); err != nil {
		t.Fatal(err)
	}
	fields := []string{"task_id", "kind", "priority", "task", "key", "status", "attempt", "max_retries", "workers", "worker_ids",
		"timeout_seconds", "heartbeat_timeout_seconds", "created_at", "run_at", "worker_address", "start_time", "end_time",
		"is_succeed", "message", "result", "schedule_id", "fire_time", "runs"}
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("task lacks %q", f)
		}
	}
	if runs, ok := m["runs"].([]any); !ok || len(runs) != 0 {
		t.Errorf("runs of a fresh task = %#v, want []", m["runs"])
	}
	if ids, ok := m["worker_ids"].([]any); !ok || len(ids) != 0 {
		t.Errorf("worker_ids = %#v, want []", m["worker_ids"])
	}
	for _, f := range []string{"created_at", "run_at", "start_time", "end_time", "fire_time", "attempt"} {
		v, ok := m[f].(float64)
		if !ok || v != float64(int64(v)) {
			t.Errorf("%s = %#v, want an integer", f, m[f])
		}
	}
	if m["start_time"].(float64) != 0 || m["created_at"].(float64) < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("times: %v", m)
	}
	if m["priority"] != "mid" || m["max_retries"].(float64) != 3 || m["heartbeat_timeout_seconds"].(float64) != 30 ||
		m["workers"].(float64) != 1 || m["status"] != "SCHEDULED" || m["result"] != nil {
		t.Errorf("defaults: %v", m)
	}

	c := e.claimOne("w1", "shape", 0)
	e.ok("POST", "/api/runs/"+c.RunID+"/succeed", map[string]any{"worker_id": "w1", "message": "sent", "result": map[string]any{"ok": true}}, nil)
	done := e.do("GET", "/api/tasks/"+id, nil)
	m = nil
	if err := json.Unmarshal(done.Data, &m); err != nil {
		t.Fatal(err)
	}
	runs := m["runs"].([]any)
	if len(runs) != 1 {
		t.Fatalf("runs: %v", runs)
	}
	run := runs[0].(map[string]any)
	for _, f := range []string{"run_id", "worker_id", "worker_address", "attempt", "status", "start_time", "end_time", "message"} {
		if _, ok := run[f]; !ok {
			t.Errorf("run lacks %q", f)
		}
	}
	if run["run_id"] != c.RunID || run["status"] != "SUCCESS" || run["message"] != "sent" || run["end_time"].(float64) == 0 {
		t.Errorf("run: %v", run)
	}
	if m["is_succeed"] != true || m["message"] != "sent" || fmt.Sprint(m["result"]) != "map[ok:true]" || m["worker_address"] != "127.0.0.1" {
		t.Errorf("finished task: %v", m)
	}

	// List items have the same shape.
	var l struct {
		Tasks []map[string]any `json:"tasks"`
	}
	e.ok("GET", "/api/tasks", nil, &l)
	for _, f := range fields[:len(fields)-1] {
		if _, ok := l.Tasks[0][f]; !ok {
			t.Errorf("list item lacks %q", f)
		}
	}
}

// TestClaimShape checks a claim's answer and the address default.
func TestClaimShape(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "cs", "priority": "low", "task": []int{1}, "timeout_seconds": 9, "heartbeat_timeout_seconds": 12})
	e.submit(map[string]any{"kind": "cs2", "task": 2})
	r := e.do("POST", "/api/workers/claim", map[string]any{"worker_id": "w1", "kinds": []string{"cs", "cs2", "cs"}, "max": 5, "address": "10.0.0.7:9000"})
	var c claimed
	if err := json.Unmarshal(r.Data, &c); err != nil || len(c.Tasks) != 2 || c.Drain {
		t.Fatalf("claim: %v", r)
	}
	got := c.Tasks[0]
	if got.TaskID != id || got.Kind != "cs" || got.Priority != rota.PriorityLow || string(got.Task) != "[1]" || got.Attempt != 1 ||
		got.TimeoutSeconds != 9 || got.HeartbeatTimeoutSeconds != 12 || !rota.ValidID(got.RunID) || got.LeaseExpiresAt == 0 {
		t.Fatalf("claimed: %+v", got)
	}
	if task := e.task(id); task.WorkerAddress != "10.0.0.7:9000" || task.Runs[0].WorkerAddress != "10.0.0.7:9000" {
		t.Fatalf("address: %q", task.WorkerAddress)
	}
	var ws workersResponse
	e.ok("GET", "/api/workers", nil, &ws)
	if len(ws.Workers) != 1 || ws.Workers[0].Running != 2 || ws.Workers[0].Status != rota.WorkerActive ||
		!slices.Equal(ws.Workers[0].Kinds, []string{"cs", "cs2"}) || ws.Workers[0].LastSeen == 0 {
		t.Fatalf("workers: %+v", ws.Workers[0])
	}
	// An empty claim answers tasks [] (not null).
	r = e.do("POST", "/api/workers/claim", map[string]any{"worker_id": "w2", "kinds": []string{"none"}})
	if !strings.Contains(string(r.Data), `"tasks":[]`) {
		t.Fatalf("empty claim: %s", r.Data)
	}
}

// TestTaskTimeout: a run past its task's timeout_seconds is ended TIMEOUT
// by the reaper; with no retries left the task ends TIMEOUT, and the late
// worker's report is refused.
func TestTaskTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.submit(map[string]any{"kind": "slow", "task": 1, "timeout_seconds": 1, "max_retries": 0, "heartbeat_timeout_seconds": 60})
	c := e.claimOne("w1", "slow", 0)
	if c.TimeoutSeconds != 1 {
		t.Fatalf("claimed %+v", c)
	}
	waitFor(t, 5*time.Second, "the task to time out", func() bool { return e.task(id).Status == rota.StatusTimeout })
	got := e.task(id)
	if got.IsSucceed || got.EndTime == 0 || len(got.Runs) != 1 || got.Runs[0].Status != rota.StatusTimeout {
		t.Fatalf("timed out task: %+v runs %+v", got.taskJSON, got.Runs)
	}
	wantErr(t, e.do("POST", "/api/runs/"+c.RunID+"/succeed", map[string]any{"worker_id": "w1"}), rota.CodeLeaseLost)
}

// TestKindMaxRunning: max_running caps the running runs of a kind.
func TestKindMaxRunning(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.ok("PUT", "/api/kinds/capped", map[string]any{"max_running": 1}, nil)
	for i := range 3 {
		e.submit(map[string]any{"kind": "capped", "task": i, "heartbeat_timeout_seconds": 60})
	}
	c := e.claim("w1", []string{"capped"}, 3, 0)
	if len(c.Tasks) != 1 {
		t.Fatalf("claimed %d tasks under max_running 1", len(c.Tasks))
	}
	if c2 := e.claim("w2", []string{"capped"}, 3, 0); len(c2.Tasks) != 0 {
		t.Fatalf("a second worker went over max_running")
	}
	e.succeed(c.Tasks[0].RunID, "w1")
	if c2 := e.claim("w2", []string{"capped"}, 3, 0); len(c2.Tasks) != 1 {
		t.Fatalf("after a run ended: %d tasks", len(c2.Tasks))
	}
}

// TestKeyScopedByKind: the same key in two kinds makes two tasks.
func TestKeyScopedByKind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.submit(map[string]any{"kind": "email", "task": 1, "key": "k1"})
	b := e.submit(map[string]any{"kind": "sms", "task": 1, "key": "k1"})
	if a == b {
		t.Fatal("one key in two kinds returned one task")
	}
	var r submitResponse
	e.ok("POST", "/api/tasks", map[string]any{"kind": "sms", "task": 2, "key": "k1"}, &r)
	if r.TaskID != b || !r.Existing {
		t.Fatalf("resubmit: %+v", r)
	}
	if got := e.task(b); string(got.Task) != "1" {
		t.Fatalf("the existing task's payload changed to %s", got.Task)
	}
}

// TestHeartbeatKeepsLease: heartbeats at a third of the heartbeat timeout
// keep a run alive past that timeout.
func TestHeartbeatKeepsLease(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A 2 s lease renewed every 200 ms for 3 s: the run outlives its first
	// lease, with room for a loaded test machine.
	id := e.submit(map[string]any{"kind": "hb", "task": 1, "heartbeat_timeout_seconds": 2})
	c := e.claimOne("w1", "hb", 0)
	var last int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var hb heartbeatResponse
		e.ok("POST", "/api/runs/"+c.RunID+"/heartbeat", map[string]any{"worker_id": "w1"}, &hb)
		if hb.Stop || hb.Drain || hb.LeaseExpiresAt < last || hb.LeaseExpiresAt < time.Now().Unix() {
			t.Fatalf("heartbeat: %+v (previous lease %d)", hb, last)
		}
		last = hb.LeaseExpiresAt
	}
	if got := e.task(id); got.Status != rota.StatusRunning || len(got.Runs) != 1 {
		t.Fatalf("after 3s of heartbeats: %s, %d runs", got.Status, len(got.Runs))
	}
	if r := e.succeed(c.RunID, "w1"); r.Status != rota.StatusSuccess {
		t.Fatalf("succeed: %+v", r)
	}
}
