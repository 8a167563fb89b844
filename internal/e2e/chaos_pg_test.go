package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePG is a PostgreSQL instance of the fault suite's own: initdb into
// a temporary directory, a free port on 127.0.0.1, trust authentication.
// The suite stops it with `pg_ctl stop -m immediate` (a crash, as far as
// the database is concerned) and starts it again, which it must never do
// to a PostgreSQL that others share.
type privatePG struct {
	bin  string // directory of initdb and pg_ctl
	dir  string // owns data/ and the log
	port int
	as   string // run the binaries as this user ("" as ourselves)
}

// pgBinDir finds PostgreSQL's server binaries: on PATH, else the newest
// /usr/lib/postgresql/*/bin.
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no initdb/pg_ctl on PATH nor in /usr/lib/postgresql/*/bin: install the PostgreSQL server")
}

// startPrivatePG creates and starts a private instance; the test's cleanup
// stops it and removes its files. As root (PostgreSQL refuses to run as
// root) it runs as the user postgres.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rota-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg := &privatePG{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.as = "postgres"
	}
	port, err := strconv.Atoi(strings.TrimPrefix(freePort(t), "127.0.0.1:"))
	if err != nil {
		t.Fatal(err)
	}
	pg.port = port
	if out, err := pg.run("initdb", "-D", pg.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.start(t)
	t.Cleanup(func() { pg.run("pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop") })
	return pg
}

func (pg *privatePG) data() string { return filepath.Join(pg.dir, "data") }

// run runs one of PostgreSQL's binaries (as pg.as).
func (pg *privatePG) run(name string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(pg.bin, name)}, args...)
	if pg.as != "" {
		argv = append([]string{"runuser", "-u", pg.as, "--"}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = pg.dir
	return cmd.CombinedOutput()
}

// start starts the instance and waits until it accepts connections.
func (pg *privatePG) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c max_connections=300 -c shared_buffers=32MB", pg.port, pg.dir)
	if out, err := pg.run("pg_ctl", "-D", pg.data(), "-l", filepath.Join(pg.dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), pg.url())
		if err == nil {
			conn.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("private PostgreSQL does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// crash stops the instance with -m immediate: no checkpoint, every
// connection cut, as a power loss of the database would.
func (pg *privatePG) crash(t *testing.T) {
	t.Helper()
	if out, err := pg.run("pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
}

// url is the instance's connection URL.
func (pg *privatePG) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}
