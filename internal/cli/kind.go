package cli

import (
	"context"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func newKindCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kind",
		Short: "List and configure kinds (priority factor, pause, limits)",
		Long: `List and configure kinds: the settings shared by all tasks of one kind.

Exit codes: 0 ok, 1 error, 2 bad usage or input rejected by the server, 3 no such kind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newKindListCmd(env), newKindGetCmd(env), newKindSetCmd(env),
		newKindPauseCmd(env, true), newKindPauseCmd(env, false))
	return cmd
}

func kindHeader() []string {
	return []string{"KIND", "PRIORITY_FACTOR", "PAUSED", "MAX_RUNNING", "RATE", "RETENTION"}
}

func kindRow(t *table, k *rota.Kind) {
	maxRunning, rate := "none", "none"
	if k.MaxRunning > 0 {
		maxRunning = cell(k.MaxRunning)
	}
	if k.Rate > 0 {
		rate = cell(k.Rate) + "/s"
	}
	retention := "forever"
	if k.RetentionSeconds > 0 {
		retention = formatSeconds(k.RetentionSeconds)
	}
	t.row(k.Name, k.PriorityFactor, k.Paused, maxRunning, rate, retention)
}

func newKindListCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the kinds and their settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.read(cmd, "/api/kinds", func(ctx context.Context, c *rotaclient.Client) error {
				kinds, err := c.ListKinds(ctx)
				if err != nil {
					return o.fail(err)
				}
				t := newTable(env.Stdout, kindHeader()...)
				for i := range kinds {
					kindRow(t, &kinds[i])
				}
				return t.flush()
			})
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func newKindGetCmd(env Env) *cobra.Command {
	return newOneRefCmd(env, oneRef[*rota.Kind]{
		Use:    "get KIND",
		Short:  "Show one kind's settings",
		Arg:    "KIND",
		Method: http.MethodGet, Path: refPath("/api/kinds/", ""),
		Do:   (*rotaclient.Client).GetKind,
		Show: printKind,
	})
}

// printKind prints a kind as one row of the kinds table.
func printKind(w io.Writer, k *rota.Kind) error {
	t := newTable(w, kindHeader()...)
	kindRow(t, k)
	return t.flush()
}

func newKindSetCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{
		"priority_factor": "priority-factor", "paused": "paused", "max_running": "max-running",
		"rate": "rate", "retention_seconds": "retention", "dispatch": "dispatch",
	}}
	var (
		factor, maxRunning, retention int
		paused                        bool
		rate                          float64
		dispatch                      string
	)
	cmd := &cobra.Command{
		Use:   "set KIND [--priority-factor N] [--paused] [--max-running N] [--rate R] [--retention D] [--dispatch pull|push]",
		Short: "Create a kind or change some of its settings",
		Long: `Create a kind or change the settings given as flags; the others keep their value.

  --priority-factor f   high, mid and low tasks are served in rounds of f², f and 1
  --max-running N       at most N runs of the kind at once, cluster-wide (0: no cap)
  --rate R              at most R run starts per second (0: no limit)
  --retention D         delete finished tasks older than D (0: keep them)
  --paused              a paused kind accepts tasks but hands none out
  --dispatch push       also post the kind's tasks to its registered push workers (pull: workers claim them)`,
		Example: `  rota kind set email --priority-factor 3 --max-running 20
  rota kind set reports --retention 168h`,
		Args: exactArgs("KIND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			var s rotaclient.KindSettings
			fs := cmd.Flags()
			if fs.Changed("priority-factor") {
				s.PriorityFactor = &factor
			}
			if fs.Changed("paused") {
				s.Paused = &paused
			}
			if fs.Changed("max-running") {
				s.MaxRunning = &maxRunning
			}
			if fs.Changed("rate") {
				s.Rate = &rate
			}
			if fs.Changed("retention") {
				s.RetentionSeconds = &retention
			}
			if fs.Changed("dispatch") {
				s.Dispatch = &dispatch
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if o.json() {
				return o.call(cmd.Context(), c, http.MethodPut, "/api/kinds/"+pathEscape(args[0]), s)
			}
			k, err := c.SetKind(cmd.Context(), args[0], s)
			if err != nil {
				return o.fail(err)
			}
			t := newTable(env.Stdout, kindHeader()...)
			kindRow(t, k)
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&factor, "priority-factor", rota.DefaultPriorityFactor, "weight f of the f²:f:1 rounds of high, mid and low")
	f.BoolVar(&paused, "paused", false, "pause (true) or resume (false) the kind")
	f.IntVar(&maxRunning, "max-running", 0, "cluster-wide cap on running runs (0: none)")
	f.Float64Var(&rate, "rate", 0, "run starts per second (0: no limit)")
	f.Var(secondsValue{&retention}, "retention", "delete finished tasks older than this (0: keep)")
	f.StringVar(&dispatch, "dispatch", rota.DispatchPull, "how tasks reach workers: pull (claims) or push (posted to registered push workers)")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func newKindPauseCmd(env Env, pause bool) *cobra.Command {
	r := oneRef[*rota.Kind]{
		Use: "pause KIND", Short: "Stop handing out a kind's tasks (they are still accepted)",
		Arg: "KIND", Method: http.MethodPost, Path: refPath("/api/kinds/", "/pause"),
		Do: (*rotaclient.Client).PauseKind, Show: printKind,
	}
	if !pause {
		r.Use, r.Short = "resume KIND", "Hand out a paused kind's tasks again"
		r.Path, r.Do = refPath("/api/kinds/", "/resume"), (*rotaclient.Client).ResumeKind
	}
	return newOneRefCmd(env, r)
}
