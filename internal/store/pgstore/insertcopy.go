package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
)

// Unkeyed tasks without dependencies (every batch submit, every group of
// single submits) are inserted with one COPY outside a transaction block:
// PostgreSQL runs it as a transaction of its own, which has committed (and,
// synchronous_commit being on, its WAL flushed) when the COPY's result
// arrives, so acknowledged still means durable. Against BEGIN, INSERT …
// SELECT FROM unnest(arrays) and COMMIT, it saves PostgreSQL the two
// statements, the arrays' decoding and unnesting and the executor's row
// at a time heap insert (COPY writes a page's worth of rows with one WAL
// record), and the server the arrays' building. Measured on the loaded
// 2-core machine, PostgreSQL's CPU per task of batches of 100 (backend
// schedstat, 3 alternated runs): 67.7/81.8/74.4 µs with unnest in a
// transaction, 57.7/69.9/67.8 µs with COPY.
//
// Every row inserts or the COPY fails as a whole (a taken id, a refused
// payload): nothing committed then, as with the transaction. A task whose
// kind this node has not seen stored goes the transactional way, which
// creates the kind's row in the same transaction (rows of kinds are never
// deleted, so the next insert of that kind finds it known).

// copyColumns are the columns COPY fills, in the order of copyRow's values.
var copyColumns = []string{"id", "kind", "level", "payload", "status", "max_retries", "workers", "worker_ids",
	"timeout_s", "hb_timeout_s", "created_at", "run_at", "schedule_id", "fire_time", "updated_at"}

var tasksTable = pgx.Identifier{"tasks"}

// copyable reports whether ps may be inserted by insertCopy: unkeyed,
// without dependencies, of kinds whose rows exist.
func (s *Store) copyable(ps []store.TaskInsertParams) bool {
	for i := range ps {
		p := &ps[i]
		if p.Key != "" || len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0 {
			return false
		}
		if i > 0 && p.Kind == ps[i-1].Kind {
			continue
		}
		if _, known := s.knownKinds.Load(p.Kind); !known {
			return false
		}
	}
	return true
}

// insertCopy inserts ps (copyable) with one COPY in a transaction of its
// own, then posts their kinds' notifications.
func (s *Store) insertCopy(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.translate("insert tasks", err)
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.translate("insert tasks", err)
	}
	defer c.Release()
	// Once sent, the COPY is waited for whatever ctx does: a caller must
	// not be told that an insert failed when it committed.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	n, err := c.Conn().CopyFrom(cctx, tasksTable, copyColumns, &copyRows{ps: ps, i: -1})
	if err != nil {
		return nil, s.translate("insert tasks", err)
	}
	if n != int64(len(ps)) {
		return nil, s.translate("insert tasks", fmt.Errorf("copy inserted %d of %d tasks", n, len(ps)))
	}
	return s.inserted(ps), nil
}

// copyRows is a pgx.CopyFromSource over tasks to insert. Its values are
// reused from row to row (pgx encodes a row before asking for the next).
type copyRows struct {
	ps  []store.TaskInsertParams
	i   int
	row [15]any
}

func (r *copyRows) Next() bool {
	r.i++
	return r.i < len(r.ps)
}

func (r *copyRows) Values() ([]any, error) {
	p := &r.ps[r.i]
	created, runAt := ms(p.Now), ms(p.RunAt)
	if runAt == 0 {
		runAt = created
	}
	var payload any // NULL when empty; the JSON as it is otherwise
	if len(p.Payload) > 0 {
		payload = []byte(p.Payload)
	}
	r.row = [15]any{p.ID, p.Kind, int16(p.Priority.Level()), payload, "SCHEDULED", int32(p.MaxRetries), int32(p.Workers),
		idList(p.WorkerIDs), int32(p.TimeoutSeconds), int32(p.HeartbeatTimeoutSeconds), created, runAt, p.ScheduleID,
		ms(p.FireTime), created}
	return r.row[:], nil
}

func (r *copyRows) Err() error { return nil }

// copyMinRows is the fewest tasks insertNoDeps sends by COPY. A COPY has
// a fixed cost that a small INSERT does not: in pg_stat_statements, a lone
// task's COPY took 0.385 ms of PostgreSQL's time against 0.100 ms for its
// INSERT, while per row COPY is the cheaper (batches of 100: ~58 against
// ~68 µs a task); the two lines cross at about 20 rows.
const copyMinRows = 16

// insertNoDeps inserts tasks without dependencies: unkeyed and of known
// kinds (copyable), with one statement outside a transaction block (COPY
// from copyMinRows tasks on, else INSERT); otherwise in a transaction
// (insertTx).
func (s *Store) insertNoDeps(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	switch {
	case !s.copyable(ps):
		return s.insertTx(ctx, ps)
	case len(ps) >= copyMinRows:
		return s.insertCopy(ctx, ps)
	default:
		return s.insertAlone(ctx, ps)
	}
}

// insertOneSQL inserts one unkeyed task (insertArgs without the key).
const insertOneSQL = `INSERT INTO tasks (id, kind, level, payload, status, max_retries, workers, worker_ids,
	timeout_s, hb_timeout_s, created_at, run_at, schedule_id, fire_time, updated_at)
	VALUES ($1, $2, $3, $4::json, 'SCHEDULED', $5, $6, $7, $8, $9, $10, $11, $12, $13, $10)`

// insertAlone inserts ps (copyable) with one INSERT outside a transaction
// block, a transaction of its own as the COPY is (insertCopy), then posts
// their kinds' notifications.
func (s *Store) insertAlone(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.translate("insert tasks", err)
	}
	var (
		sql  string
		args []any
	)
	if len(ps) == 1 {
		a := insertArgs(ps[0])
		sql, args = insertOneSQL, append(a[:4:4], a[5:]...) // without the key
	} else {
		sql, args = insertBatch(ps)
	}
	// Once sent, the INSERT is waited for whatever ctx does (see
	// insertCopy).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	tag, err := s.pool.Exec(cctx, sql, args...)
	if err != nil {
		return nil, s.translate("insert tasks", err)
	}
	if n := tag.RowsAffected(); n != int64(len(ps)) {
		return nil, s.translate("insert tasks", fmt.Errorf("inserted %d of %d tasks", n, len(ps)))
	}
	return s.inserted(ps), nil
}

// inserted is the answer to the insert of ps, which committed; it posts
// their kinds' notifications.
func (s *Store) inserted(ps []store.TaskInsertParams) []store.TaskInsertResult {
	out := make([]store.TaskInsertResult, len(ps))
	ns := make(notes)
	for i := range ps {
		p := &ps[i]
		out[i] = store.TaskInsertResult{Task: insertedTask(*p)}
		ns.add(p.Kind, ms(out[i].Task.RunAt), ms(p.Now), false)
	}
	s.post(ns)
	return out
}
