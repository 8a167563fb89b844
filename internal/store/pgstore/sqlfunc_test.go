package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
)

// sqlConn returns a connection to the test database and the name, in
// schema, of a function of the store's migrations.
func sqlConn(t *testing.T, schema, fn string) (*pgx.Conn, string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, pgx.Identifier{schema, fn}.Sanitize()
}

// TestRoundSlotSQL checks the SQL function round_slot, and the pick's
// restatement of it (roundLevelsSQL and slotSQL, which compute its values
// from per-level constants without calling it), against their Go
// transcription (which TestRoundSlotsMatchSQLite checks against
// store.WeightedPick).
func TestRoundSlotSQL(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openSchema(t, schema, "n1")
	conn, fn := sqlConn(t, schema, "round_slot")
	queries := map[string]string{
		"round_slot": `SELECT ` + fn + `($1, $2, $3, i) FROM generate_series(0, 39) AS i ORDER BY i`,
		"the pick's slots": `WITH k AS (SELECT $1::int AS f, $2::int AS pos), ` + pgstore.RoundLevelsSQL + `
			SELECT ` + pgstore.SlotSQL + ` FROM (SELECT i::bigint AS i, $3::smallint AS level FROM generate_series(0, 39) AS i) AS r
			JOIN lv ON lv.level = r.level ORDER BY r.i`,
	}
	for f := 0; f <= 5; f++ {
		round := max(f, 1)*max(f, 1) + max(f, 1) + 1
		for pos := -1; pos <= round; pos++ {
			want := pgstore.RoundSlots(f, pos, 40)
			for level := range 3 {
				for name, q := range queries {
					rows, err := conn.Query(t.Context(), q, f, pos, level)
					if err != nil {
						t.Fatal(err)
					}
					got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want[level]) {
						t.Fatalf("%s (f %d, pos %d, level %d) = %v, want %v", name, f, pos, level, got, want[level])
					}
				}
			}
		}
	}
}

// TestRateRefillSQL checks the SQL function rate_refill against
// store.RateRefill, which sqlitestore uses.
func TestRateRefillSQL(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openSchema(t, schema, "n1")
	conn, fn := sqlConn(t, schema, "rate_refill")
	for _, rate := range []float64{0.1, 0.5, 1, 2, 3.7, 100} {
		for _, tokens := range []float64{0, 0.25, 0.999, 1, 1.5, 99.5} {
			for _, at := range []int64{0, 1767225600000, 1767225600123} {
				for _, dt := range []int64{0, 1, 333, 499, 500, 1000, 2345, 86400000} {
					now := at + dt
					if at == 0 {
						now = 1767225600000 + dt
					}
					var got float64
					if err := conn.QueryRow(t.Context(), `SELECT `+fn+`($1, $2, $3, $4)`, rate, tokens, at, now).Scan(&got); err != nil {
						t.Fatal(err)
					}
					if want := store.RateRefill(rate, tokens, at, now); got != want {
						t.Fatalf("rate_refill(%v, %v, %d, %d) = %v, want %v", rate, tokens, at, now, got, want)
					}
				}
			}
		}
	}
}
