package cli

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// TestServerMemoryLimit: --memory-limit-mib sets the process's soft memory
// limit, and GOMEMLIMIT wins over it. Not parallel: the limit is the
// process's.
func TestServerMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	log := slog.New(slog.DiscardHandler)
	env := func(v string) Env {
		return Env{Getenv: func(k string) string {
			if k == "GOMEMLIMIT" {
				return v
			}
			return ""
		}}
	}
	sf := &serverFlags{memLimit: 100}
	sf.applyMemoryLimit(env(""), log)
	if got := debug.SetMemoryLimit(-1); got != 100<<20 {
		t.Errorf("limit %d, want %d", got, 100<<20)
	}
	debug.SetMemoryLimit(old)
	sf.memLimit = 32
	sf.applyMemoryLimit(env("1GiB"), log)
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Errorf("limit %d with GOMEMLIMIT set, want it untouched (%d)", got, old)
	}
}

// TestServerGCPercent: --gc-percent sets the GC target, GOGC wins over it.
// Not parallel: the target is the process's.
func TestServerGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	log := slog.New(slog.DiscardHandler)
	env := func(v string) Env {
		return Env{Getenv: func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}}
	}
	sf := &serverFlags{gcPercent: DefaultGCPercent}
	sf.applyMemoryLimit(env(""), log)
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("gc percent %d, want %d", got, DefaultGCPercent)
	}
	sf.applyMemoryLimit(env("200"), log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("gc percent %d with GOGC set, want it untouched (100)", got)
	}
}

func TestServerMemoryLimitNegative(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"server", "--memory-limit-mib", "-1", "--data", t.TempDir()},
		Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errOut.String(), "memory-limit-mib") {
		t.Errorf("exit %d, stderr %q; want a usage error", code, errOut.String())
	}
}
