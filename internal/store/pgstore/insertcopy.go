package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

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

// copyColumns are the columns COPY fills, in the order of appendCopyRows's fields.
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
	// Encoded before a connection is taken, so that it is held for the
	// COPY's round trip only.
	buf := copyBufs.Get().(*[]byte)
	defer putCopyBuf(buf)
	*buf = appendCopyRows((*buf)[:0], ps)
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.translate("insert tasks", err)
	}
	defer c.Release()
	// Once sent, the COPY is waited for whatever ctx does: a caller must
	// not be told that an insert failed when it committed.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	n, err := copyFrom(cctx, c.Conn(), *buf)
	if err != nil {
		return nil, s.translate("insert tasks", err)
	}
	if n != int64(len(ps)) {
		return nil, s.translate("insert tasks", fmt.Errorf("copy inserted %d of %d tasks", n, len(ps)))
	}
	return s.inserted(ps), nil
}

// copySQL is the COPY of insertCopy, in PostgreSQL's binary format.
var copySQL = "COPY tasks (" + strings.Join(copyColumns, ", ") + ") FROM STDIN WITH (FORMAT binary)"

// copyFrom sends data, a binary COPY stream of tasks, on conn and returns
// the rows it inserted. It is pgx's CopyFrom without its per-value
// encoding: pgx boxed every value in an interface, looked up an encode
// plan for it and wrote the stream through a pipe and a goroutine, a
// tenth of the server's CPU under a load of batches; the rows are written
// here by hand (appendCopyRows). The connection's CopyFrom tracer (the
// statement count of Config.Cost) is told of it as pgx would tell it.
func copyFrom(ctx context.Context, conn *pgx.Conn, data []byte) (int64, error) {
	tr, _ := conn.Config().Tracer.(pgx.CopyFromTracer)
	if tr != nil {
		ctx = tr.TraceCopyFromStart(ctx, conn, pgx.TraceCopyFromStartData{TableName: tasksTable, ColumnNames: copyColumns})
	}
	tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), copySQL)
	if tr != nil {
		tr.TraceCopyFromEnd(ctx, conn, pgx.TraceCopyFromEndData{CommandTag: tag, Err: err})
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// copyBufs holds the buffers of the COPY streams (a batch of 100 small
// tasks is ~15 KB).
var copyBufs = sync.Pool{New: func() any { return new([]byte) }}

// putCopyBuf returns buf to copyBufs unless it grew too large to keep.
func putCopyBuf(buf *[]byte) {
	if cap(*buf) <= 1<<20 {
		copyBufs.Put(buf)
	}
}

// The binary COPY format (PostgreSQL's "COPY" page): a header, then per
// row the number of fields (int16) and each field as its length (int32,
// -1 for NULL) and its bytes in the type's binary form, then -1 (int16).
// The types are the columns' (migrations): text, smallint, json (its
// binary form is its text), integer, text[], bigint.
const copyHeader = "PGCOPY\n\377\r\n\000" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// textOID is the OID of PostgreSQL's text type, the element type of a
// text[] in its binary form.
const textOID = 25

// appendCopyRows appends the binary COPY stream of ps (the columns of
// copyColumns, in order) to b.
func appendCopyRows(b []byte, ps []store.TaskInsertParams) []byte {
	b = append(b, copyHeader...)
	for i := range ps {
		p := &ps[i]
		created, runAt := ms(p.Now), ms(p.RunAt)
		if runAt == 0 {
			runAt = created
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(copyColumns)))
		b = appendText(b, p.ID)
		b = appendText(b, p.Kind)
		b = binary.BigEndian.AppendUint32(b, 2)
		b = binary.BigEndian.AppendUint16(b, uint16(int16(p.Priority.Level())))
		if len(p.Payload) == 0 {
			b = binary.BigEndian.AppendUint32(b, math.MaxUint32) // -1: NULL
		} else {
			b = appendText(b, string(p.Payload))
		}
		b = appendText(b, "SCHEDULED")
		b = appendInt4(b, p.MaxRetries)
		b = appendInt4(b, p.Workers)
		b = appendTextArray(b, p.WorkerIDs)
		b = appendInt4(b, p.TimeoutSeconds)
		b = appendInt4(b, p.HeartbeatTimeoutSeconds)
		b = appendInt8(b, created)
		b = appendInt8(b, runAt)
		b = appendText(b, p.ScheduleID)
		b = appendInt8(b, ms(p.FireTime))
		b = appendInt8(b, created)
	}
	return binary.BigEndian.AppendUint16(b, math.MaxUint16) // -1: the end
}

// appendText appends a text (or json) field.
func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendInt4 appends an integer field (int32, as pgx encoded the int32
// conversion of n).
func appendInt4(b []byte, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(int32(n)))
}

// appendInt8 appends a bigint field.
func appendInt8(b []byte, n int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// appendTextArray appends a text[] field: dimensions (0 when empty, else
// 1), a has-NULLs flag, the element type, the dimension's length and
// lower bound, then each element as a field.
func appendTextArray(b []byte, ss []string) []byte {
	size := 12
	if len(ss) > 0 {
		size += 8
	}
	for _, s := range ss {
		size += 4 + len(s)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	if len(ss) == 0 {
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, 0)
		return binary.BigEndian.AppendUint32(b, textOID)
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, textOID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ss)))
	b = binary.BigEndian.AppendUint32(b, 1)
	for _, s := range ss {
		b = appendText(b, s)
	}
	return b
}

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
