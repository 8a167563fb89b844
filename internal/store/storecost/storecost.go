// Package storecost counts what a store asks of its database, so that the
// cost of a task (statements, round trips, commits) can be measured by
// tests and by `rota bench`, and a change that adds a round trip to a hot
// path fails a test instead of going unnoticed.
//
// A store given a *Counter (pgstore.Config.Cost, sqlitestore.Config.Cost)
// adds to it at every statement it sends; a nil *Counter counts nothing
// and costs nothing. Work the store does on its own, not for a caller
// (PostgreSQL notifications sent after commits, LISTEN and its pings, the
// young-table analyzer), runs under a context marked with Async and is
// counted apart, so that a caller's operation is counted exactly.
//
// What each figure means per store:
//
//   - Statements: SQL statements executed, transaction control included
//     (BEGIN, COMMIT, SAVEPOINT, RELEASE).
//   - RoundTrips: PostgreSQL: waits for the server, one per pipelined
//     batch (pgx SendBatch) or lone statement, plus one per statement
//     preparation (pgx prepares each distinct statement once per
//     connection; warmed-up paths prepare nothing). SQLite: calls into the
//     engine, one per statement (SQLite runs in the process: a "round
//     trip" is a function call, there is no pipelining).
//   - Commits: write transactions committed. Each is one WAL flush: on
//     SQLite with synchronous=FULL exactly one fsync of the WAL (plus the
//     fsyncs of the automatic checkpoint, every ~1,000 WAL pages, shared by
//     every commit since the last); on PostgreSQL one WAL flush of the
//     commit record (which PostgreSQL may share between concurrent commits).
//   - Prepares: statements prepared (PostgreSQL: pgx's per-connection
//     statement cache; SQLite: the store's statement cache).
package storecost

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Counts is what a store asked of its database.
type Counts struct {
	Statements int64
	RoundTrips int64
	Commits    int64
	Prepares   int64
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Statements: c.Statements - o.Statements,
		RoundTrips: c.RoundTrips - o.RoundTrips,
		Commits:    c.Commits - o.Commits,
		Prepares:   c.Prepares - o.Prepares,
	}
}

// String renders c compactly, for test failures and logs.
func (c Counts) String() string {
	return fmt.Sprintf("%d statements, %d round trips, %d commits, %d prepares", c.Statements, c.RoundTrips, c.Commits, c.Prepares)
}

// Snapshot is a Counter's figures at one instant: of the callers'
// operations, and of the store's own background work (see Async).
type Snapshot struct {
	Caller Counts
	Async  Counts
}

// Sub returns s - o.
func (s Snapshot) Sub(o Snapshot) Snapshot {
	return Snapshot{Caller: s.Caller.Sub(o.Caller), Async: s.Async.Sub(o.Async)}
}

// Total is the callers' and the background work's figures together.
func (s Snapshot) Total() Counts {
	return Counts{
		Statements: s.Caller.Statements + s.Async.Statements,
		RoundTrips: s.Caller.RoundTrips + s.Async.RoundTrips,
		Commits:    s.Caller.Commits + s.Async.Commits,
		Prepares:   s.Caller.Prepares + s.Async.Prepares,
	}
}

// Counter accumulates Counts. It is safe for concurrent use; the zero
// value is ready, and a nil *Counter ignores everything.
type Counter struct {
	caller, async counters
}

type counters struct {
	statements, roundTrips, commits, prepares atomic.Int64
}

func (c *counters) add(d Counts) {
	if d.Statements != 0 {
		c.statements.Add(d.Statements)
	}
	if d.RoundTrips != 0 {
		c.roundTrips.Add(d.RoundTrips)
	}
	if d.Commits != 0 {
		c.commits.Add(d.Commits)
	}
	if d.Prepares != 0 {
		c.prepares.Add(d.Prepares)
	}
}

func (c *counters) load() Counts {
	return Counts{
		Statements: c.statements.Load(),
		RoundTrips: c.roundTrips.Load(),
		Commits:    c.commits.Load(),
		Prepares:   c.prepares.Load(),
	}
}

// Add counts d for the work of ctx: as background work when ctx is marked
// with Async, else as a caller's.
func (c *Counter) Add(ctx context.Context, d Counts) {
	if c == nil {
		return
	}
	if IsAsync(ctx) {
		c.async.add(d)
		return
	}
	c.caller.add(d)
}

// Snapshot returns the figures so far (zero for a nil Counter).
func (c *Counter) Snapshot() Snapshot {
	if c == nil {
		return Snapshot{}
	}
	return Snapshot{Caller: c.caller.load(), Async: c.async.load()}
}

type asyncKey struct{}

// Async marks ctx as the store's own background work (not a caller's
// operation): what runs under it is counted in Snapshot.Async.
func Async(ctx context.Context) context.Context {
	return context.WithValue(ctx, asyncKey{}, true)
}

// IsAsync reports whether ctx was marked with Async.
func IsAsync(ctx context.Context) bool {
	v, _ := ctx.Value(asyncKey{}).(bool)
	return v
}

// Rows is what a store wrote to a table, as PostgreSQL counts it
// (pg_stat_user_tables): every insert, update and delete writes a row
// version; a HOT update is an update that touched no index.
type Rows struct {
	Inserted, Updated, HotUpdated, Deleted int64
}

// Versions is the row versions written: inserted + updated + deleted.
func (r Rows) Versions() int64 { return r.Inserted + r.Updated + r.Deleted }

// Sub returns r - o.
func (r Rows) Sub(o Rows) Rows {
	return Rows{
		Inserted:   r.Inserted - o.Inserted,
		Updated:    r.Updated - o.Updated,
		HotUpdated: r.HotUpdated - o.HotUpdated,
		Deleted:    r.Deleted - o.Deleted,
	}
}

// Add returns r + o.
func (r Rows) Add(o Rows) Rows {
	return Rows{
		Inserted:   r.Inserted + o.Inserted,
		Updated:    r.Updated + o.Updated,
		HotUpdated: r.HotUpdated + o.HotUpdated,
		Deleted:    r.Deleted + o.Deleted,
	}
}

// SubTables returns the per-table difference a - b (tables of a).
func SubTables(a, b map[string]Rows) map[string]Rows {
	out := make(map[string]Rows, len(a))
	for t, r := range a {
		if d := r.Sub(b[t]); d != (Rows{}) {
			out[t] = d
		}
	}
	return out
}

// SumTables adds up the tables' rows.
func SumTables(m map[string]Rows) Rows {
	var sum Rows
	for _, r := range m {
		sum = sum.Add(r)
	}
	return sum
}
