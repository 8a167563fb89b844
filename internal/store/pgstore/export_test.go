package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// CandidatesSQL is the claim's pick, for EXPLAIN in benchmarks. Its
// parameters: kind, now (ms), worker id, max.
var CandidatesSQL = candidatesSQL

// Hot statements, for EXPLAIN in benchmarks.
var (
	StartRunsSQL    = startRunsSQL
	LockRunTaskSQL  = lockRunTaskSQL
	RunLogSQL       = runLogSQL
	HeartbeatRowSQL = heartbeatRowSQL
	SettleTaskSQL   = settleTaskSQL
	ExpiredTasksSQL = expiredTasksSQL
	CompleteFastSQL = completeFastSQL
)

// ClaimableSQL is the claim's "is there work" probe of kind $1 for worker
// $2 at $3 (ms), for plan tests.
var ClaimableSQL = claimableSQL(false, "$1::text", "$2::text", "$3::bigint")

// ListStatusHint is TaskList's store.StatusHint, for plan tests.
var ListStatusHint store.StatusHint = listStatusHint

// PinnedWaitingSQL is TaskPinnedWaiting's statement ($1 now in ms, $2
// the most groups), for plan tests.
const PinnedWaitingSQL = pinnedWaitingSQL

// InsertStartedSQL is TaskInsertStarted's statement, for plan tests.
const InsertStartedSQL = insertStartedSQL

// RoundSlots exposes the Go transcription of round_slot to the tests.
func RoundSlots(f, pos, n int) [3][]int64 { return roundSlots(f, pos, n) }

// CompleteGroup settles reports as one group of the completers would (one
// transaction), bypassing the queue, so that tests reach the group path
// whatever the timing.
func CompleteGroup(s *Store, ctx context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error, error) {
	group := make([]*completeReq, len(ps))
	for i, p := range ps {
		group[i] = &completeReq{ctx: ctx, p: p}
	}
	tasks, errs := s.completeFast(group), make([]error, len(group))
	var rest []*completeReq
	var at []int
	for i, r := range group {
		if tasks[i] == nil {
			rest, at = append(rest, r), append(at, i)
		}
	}
	if len(rest) == 0 {
		return tasks, errs, nil
	}
	res, err := s.completeMany(rest)
	if err != nil {
		return nil, nil, err
	}
	for j, r := range res {
		tasks[at[j]], errs[at[j]] = r.task, r.err
	}
	return tasks, errs, nil
}

// AnalyzeYoung runs one pass of the young-table analyzer.
func AnalyzeYoung(s *Store, ctx context.Context) ([]string, error) { return s.analyzeYoung(ctx, true) }

// InsertGroup inserts requests as one group of the inserters would,
// bypassing the queue, so that tests reach the group path whatever the
// timing; it returns each request's answer.
func InsertGroup(s *Store, ctx context.Context, reqs [][]store.TaskInsertParams) ([][]store.TaskInsertResult, []error) {
	group := make([]*insertReq, len(reqs))
	for i, ps := range reqs {
		group[i] = &insertReq{ctx: ctx, ps: ps, res: make(chan insertRes, 1)}
	}
	s.insertGroup(group)
	outs, errs := make([][]store.TaskInsertResult, len(reqs)), make([]error, len(reqs))
	for i, r := range group {
		res := <-r.res
		outs[i], errs[i] = res.out, res.err
	}
	return outs, errs
}

// HoldLeaderRowIdle begins a transaction on one of s's own connections,
// locks the leader row FOR SHARE as a fenced write does, and leaves it
// open and idle, as a process stopped mid-write would. The returned func
// ends it (rollback) if the server has not already done so.
func HoldLeaderRowIdle(s *Store, ctx context.Context) (end func(), err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT term FROM leader WHERE id = 1 FOR SHARE`); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}

// MigrateTo creates schema on url with the migrations up to version n
// only: a database as an older Rota left it.
func MigrateTo(ctx context.Context, url, schema string, n int) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer pool.Close()
	return migrateTo(ctx, pool, schema, n)
}

// CompleteLocked settles a report by the general path alone (lock, then
// write), never completeFastSQL: what the one-statement path must match.
func CompleteLocked(s *Store, ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	return s.completeOne(ctx, p)
}

// CopyMinRows is the fewest tasks an insert sends by COPY.
const CopyMinRows = copyMinRows

// ChannelName is the notification channel of a schema.
func ChannelName(schema string) string { return channelName(schema) }

// ClaimOneSQL is the one-kind claim's pick and start (claimOneSQL), for
// EXPLAIN in benchmarks. Its parameters: kind, now (ms), worker id, max,
// run ids, worker address.
var ClaimOneSQL = claimOneSQL[0]

// RoundLevelsSQL and SlotSQL are the pick's restatement of round_slot.
const (
	RoundLevelsSQL = roundLevelsSQL
	SlotSQL        = slotSQL
)

// Pool is s's connection pool.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// WarmSQL are the statements a warm connection has prepared and planned.
var WarmSQL = warmSQL
