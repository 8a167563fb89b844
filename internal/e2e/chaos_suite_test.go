package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chaosSize is how big the fault suite's scenarios are. `make chaos` sets
// ROTA_CHAOS=full for the full sizes (under 10 minutes on 2 cores); the
// ordinary test run gets the small ones (well under 2 minutes).
// ROTA_CHAOS_ONLY, a regular expression, keeps the scenarios whose
// "name/store" it matches (e.g. "zombie", "postgres").
type chaosSize struct {
	name       string
	sequential bool // run a scenario's stores one after the other, not side by side

	stormTasks  int           // scenario 1: tasks run through the kill storm
	stormSleep  int           // scenario 1: each execution's sleep, ms
	stormKill   time.Duration // scenario 1: a worker killed this often…
	stormKills  int           // scenario 1: …this many times at most
	zombieShort int           // scenario 2: zombie's runs that finish while it is stopped
	zombieLong  int           // scenario 2: zombie's runs still running when it wakes
	restartLoad time.Duration // scenario 3: submitting before, and again after, the restart
	schedules   int           // scenario 4: every-second schedules
	schedPhase  time.Duration // scenario 4: firing between the faults
	diskLoad    time.Duration // scenario 5: submitting while the disk is full
	drainGrace  time.Duration // scenario 6: the stopping worker's --grace
	inflight    int           // scenario 6: runs in flight when the worker is told to stop
	queued      int           // scenario 6: tasks submitted after the stop
}

func chaosSizes() chaosSize {
	if os.Getenv("ROTA_CHAOS") == "full" {
		return chaosSize{name: "full", sequential: true, stormTasks: 2000, stormSleep: 50, stormKill: time.Second, stormKills: 40,
			zombieShort: 8, zombieLong: 8, restartLoad: 8 * time.Second, schedules: 100, schedPhase: 8 * time.Second,
			diskLoad: 4 * time.Second, drainGrace: 10 * time.Second, inflight: 100, queued: 100}
	}
	return chaosSize{name: "small", stormTasks: 100, stormSleep: 20, stormKill: 500 * time.Millisecond, stormKills: 6,
		zombieShort: 2, zombieLong: 2, restartLoad: time.Second, schedules: 5, schedPhase: 2 * time.Second,
		diskLoad: time.Second, drainGrace: 5 * time.Second, inflight: 20, queued: 20}
}

// chaosStore is the store a scenario runs on: the embedded one (each
// server its own SQLite file) or the suite's private PostgreSQL (a schema
// per scenario, shared by its nodes).
type chaosStore struct {
	name   string
	pg     *privatePG // nil for the embedded store
	schema string
}

// withSchema returns s with a fresh schema of its own.
func (s chaosStore) withSchema() chaosStore {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s.schema = "chaos_" + hex.EncodeToString(b[:])
	return s
}

// serverArgs are the flags of a node of this store.
func (s chaosStore) serverArgs(nodeID string) []string {
	args := []string{"--retry-backoff", "50ms"}
	if s.pg != nil {
		args = append(args, "--store", s.pg.url(), "--pg-schema", s.schema, "--node-id", nodeID, "--leader-lease", "2s")
	}
	return args
}

// startNode starts a server of this store on a free port (its embedded
// data in dir): another port if a parallel test took the first one before
// the server bound it.
func (s chaosStore) startNode(t *testing.T, dir, nodeID string, extra ...string) *proc {
	t.Helper()
	for range 5 {
		p, err := tryStartServer(t, freePort(t), dir, append(s.serverArgs(nodeID), extra...)...)
		if err == nil {
			return p
		}
		if !errors.Is(err, errAddrInUse) {
			t.Fatal(err)
		}
	}
	t.Fatalf("no free port for node %s after 5 tries", nodeID)
	return nil
}

// restartNode starts a server of this store again on addr.
func (s chaosStore) restartNode(t *testing.T, addr, dir, nodeID string) *proc {
	t.Helper()
	return startServer(t, addr, dir, s.serverArgs(nodeID)...)
}

// chaosRow is one line of the suite's table.
type chaosRow struct {
	scenario, store string
	verdict
	passed bool
	note   string
}

// chaosTable renders the rows.
func chaosTable(size string, rows []chaosRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault suite (%s sizes)\n", size)
	fmt.Fprintf(&b, "%-24s %-9s %6s %5s %10s %9s  %s\n", "scenario", "store", "tasks", "lost", "duplicates", "explained", "result")
	for _, r := range rows {
		res := "ok"
		if !r.passed || r.lost > 0 || r.duplicates > r.explained {
			res = "FAIL"
		}
		if r.note != "" {
			res += " (" + r.note + ")"
		}
		fmt.Fprintf(&b, "%-24s %-9s %6d %5d %10d %9d  %s\n", r.scenario, r.store, r.tasks, r.lost, r.duplicates, r.explained, res)
	}
	return b.String()
}

// chaosScenario runs one scenario on one store and returns its row's
// counts and a note.
type chaosScenario func(t *testing.T, st chaosStore, sz chaosSize) (verdict, string)

// TestChaosSuite is the fault suite of issue 12 §6: real `rota server` and
// `rota worker` processes, the embedded store and PostgreSQL, and an
// independent fsynced ledger of executions as the oracle. It prints a table
// (scenario, store, tasks, lost, duplicates, explained) and fails on any
// loss or unexplained duplicate. `make chaos` runs it at full size.
func TestChaosSuite(t *testing.T) {
	t.Parallel()
	sz := chaosSizes()
	start := time.Now()
	pg := startPrivatePG(t)
	embedded, postgres := chaosStore{name: "embedded"}, chaosStore{name: "postgres", pg: pg}
	var rows []chaosRow
	only, err := regexp.Compile(os.Getenv("ROTA_CHAOS_ONLY"))
	if err != nil {
		t.Fatalf("ROTA_CHAOS_ONLY: %v", err)
	}
	// run runs a scenario on each of stores: one after the other at full
	// size, side by side at the small size (CI's time budget).
	run := func(name string, f chaosScenario, stores ...chaosStore) {
		var keep []chaosStore
		for _, st := range stores {
			if only.MatchString(name + "/" + st.name) {
				keep = append(keep, st)
			}
		}
		if len(keep) == 0 {
			return
		}
		out := make([]chaosRow, len(keep))
		t.Run(name, func(t *testing.T) {
			for i, st := range keep {
				t.Run(st.name, func(t *testing.T) {
					if !sz.sequential {
						t.Parallel()
					}
					began := time.Now()
					defer func() { // also after a t.Fatal
						note := out[i].note
						if note != "" {
							note += ", "
						}
						out[i].note = note + time.Since(began).Round(100*time.Millisecond).String()
						out[i].passed = !t.Failed()
					}()
					out[i] = chaosRow{scenario: name, store: st.name}
					out[i].verdict, out[i].note = f(t, st.withSchema(), sz)
				})
			}
		})
		rows = append(rows, out...)
	}
	run("1-kill-storm", chaosKillStorm, embedded, postgres)
	run("2-zombie-worker", chaosZombie, embedded, postgres)
	run("3-store-restart", chaosStoreRestart, embedded, postgres)
	run("4-leader-schedules", chaosLeaderSchedules, postgres)
	run("5-disk-full", chaosDiskFull, embedded)
	run("6-graceful-shutdown", chaosGracefulShutdown, embedded, postgres)
	table := chaosTable(sz.name, rows)
	t.Logf("\n%s(took %v)", table, time.Since(start).Round(time.Second))
	for _, r := range rows {
		if r.lost > 0 || r.duplicates > r.explained {
			t.Errorf("%s on %s: %d lost, %d duplicates of which %d explained", r.scenario, r.store, r.lost, r.duplicates, r.explained)
		}
	}
}
