package rotaapi

// BulkRequest is the body of POST /api/tasks/bulk: an action on the tasks
// named by TaskIDs or, when Filter is given, on every task matching it
// (the parameters of GET /api/tasks, as strings: "status": "SCHEDULED,RUNNING").
// Exactly one of Filter and TaskIDs.
type BulkRequest struct {
	// Action is run_again (a copy of each task, due now), stop (cancel
	// each unfinished task) or delete (each finished task; others are
	// skipped).
	Action  string            `json:"action"`
	Filter  map[string]string `json:"filter,omitempty"`
	TaskIDs []string          `json:"task_ids,omitempty"`
	// Message is recorded on stopped tasks (stop only; default "stopped").
	Message *string `json:"message,omitempty"`
}

// BulkJob is a bulk action's progress: the data of POST /api/tasks/bulk
// (202) and GET /api/tasks/bulk/{id}.
type BulkJob struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	// Total is how many tasks the job acts on: those matching the filter
	// when it started, or the ids given.
	Total int `json:"total"`
	// Done counts tasks acted on, Skipped those the action does not apply
	// to (already finished for stop, unfinished for delete, gone), Failed
	// those whose change failed.
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	// Status is running, then done (even with failures). A job whose
	// node stops ends there, its tasks already changed staying so.
	Status string `json:"status"`
	// Error is the first failure's message, if any.
	Error      string `json:"error,omitempty"`
	CreatedAt  int64  `json:"created_at"`            // unix seconds
	FinishedAt int64  `json:"finished_at,omitempty"` // unix seconds, 0 while running
	// Node is the id of the node running the job: jobs are kept in its
	// memory, so GET /api/tasks/bulk/{id} answers there.
	Node string `json:"node,omitempty"`
}

// History is the data of GET /api/stats/history: finished tasks by bucket
// of end time, oldest first.
type History struct {
	BucketSeconds int             `json:"bucket_seconds"`
	Buckets       []HistoryBucket `json:"buckets"`
}

// HistoryBucket is one bucket of History. Times are in milliseconds;
// averages are over the tasks that ran (Started), 0 when none did.
type HistoryBucket struct {
	Time          int64 `json:"time"` // the bucket's start, unix seconds
	Succeeded     int   `json:"succeeded"`
	Failed        int   `json:"failed"`   // FAILED or TIMEOUT
	Canceled      int   `json:"canceled"` // CANCELED or SKIPPED
	Started       int   `json:"started"`
	WaitAvgMs     int64 `json:"wait_avg_ms"` // run at → start of the last attempt
	WaitMaxMs     int64 `json:"wait_max_ms"`
	DurationAvgMs int64 `json:"duration_avg_ms"` // start → end
	DurationMaxMs int64 `json:"duration_max_ms"`
}
