// Package schedule runs Rota's schedules. A reader
// finds each part in its own place:
//
//   - The fire-time math — the cron dialect, calendar plans, daylight
//     saving, H and jitter, the preview — is package firetime: pure,
//     clock-free, no I/O, no goroutines, fuzzed.
//   - The engine (engine.go) fires on the leader only: a min-heap of next
//     fire times on an injected clock, each schedule's fire one atomic
//     compare-and-set store call whose decision is computed from the live
//     run state inside the transaction; the store's unique key on
//     (schedule, fire time) makes every fire time yield at most one run.
//     The run policies — overlap, concurrency, failure (RUN_NEW, SKIP,
//     RETRY, BACKOFF, HALF_OPEN), misfire — are the pure decision logic
//     of policy.go; Arm (engine_state.go) computes the state of a
//     schedule that is created, edited, paused or resumed, and the error
//     state of one that cannot go on.
//   - The service layer (service.go) is what the HTTP handlers call:
//     create, edit, pause, resume, delete, trigger and backfill.
//   - The executor that runs schedules with an HTTP target is package
//     httpexec.
package schedule
