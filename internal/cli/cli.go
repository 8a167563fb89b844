// Package cli implements the rota command line: one file per subcommand.
// main only wires signals and exit codes; everything else is here, so tests
// run commands in-process with their own arguments and output streams.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotahq/rota/internal/buildinfo"
)

// Exit codes that scripts can trust.
const (
	ExitOK       = 0
	ExitError    = 1 // the operation failed (server error, unreachable server, …)
	ExitUsage    = 2 // bad flags or arguments
	ExitNotFound = 3 // the named task, worker, kind or schedule does not exist
	ExitConflict = 4 // the target's state forbids the operation (e.g. stopping a finished task)
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// Env is what a command may touch of the outside world.
type Env struct {
	Stdout, Stderr io.Writer           // where commands print; required
	Stdin          io.Reader           // read by --payload-file -; default os.Stdin
	Getenv         func(string) string // reads ROTA_* variables; default os.Getenv
}

// Run executes the rota command line and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = os.Stdin
	}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(env.Stderr, "rota:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// isUsage recognises cobra's own argument and flag errors.
func isUsage(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "unknown shorthand", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "rota",
		Short: "Rota: a durable distributed task scheduler",
		Long: `Rota runs tasks: publish work over HTTP, run it on workers written in any language,
schedule it with cron expressions or calendar plans, and never lose it.

Start a server with an embedded store:   rota server
Submit a task:                           rota task submit --kind email --payload '{"to":"a"}'
Run a worker (any language):             rota worker --kind email -- ./send.sh
Watch the queue:                         rota stats; rota task list; rota worker list
Which build is this:                     rota version

Client commands talk to --server (default http://127.0.0.1:8080), print tables for people
and, with -o json, the API's data for scripts. Exit codes: 0 ok, 1 error, 2 bad usage or
input, 3 not found, 4 conflict (the target's state forbids the operation).
Every flag also reads an environment variable ROTA_<FLAG> (dashes become underscores),
e.g. ROTA_SERVER for --server.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// rota --version prints what rota version does.
		Version: buildinfo.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newServerCmd(env), newTaskCmd(env), newKindCmd(env), newScheduleCmd(env), newWorkerCmd(env), newStatsCmd(env), newBenchCmd(env),
		newVersionCmd(env), newHealthcheckCmd(env), newTokenCmd(env))
	return root
}

// bindEnv fills every flag of fs not set on the command line from the
// environment variable ROTA_<NAME>, and notes the variable in the usage.
func bindEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		if !strings.Contains(f.Usage, name) {
			f.Usage += " (env " + name + ")"
		}
		if f.Changed || err != nil {
			return
		}
		if v := getenv(name); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = usageError("environment %s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}

func envName(flag string) string {
	return "ROTA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// annotateEnv adds the env variable names to the flags' help before usage
// is printed.
func annotateEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if name := envName(f.Name); !strings.Contains(f.Usage, name) {
			f.Usage += " (env " + name + ")"
		}
	})
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", format)
}
