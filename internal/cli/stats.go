package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

func newStatsCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count tasks by kind and status",
		Long: `Count tasks by kind and status, with the age of the oldest task waiting to be
claimed (OLDEST_WAITING) and whether the kind is paused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.read(cmd, "/api/stats", func(ctx context.Context, c *rotaclient.Client) error {
				st, err := c.Stats(ctx)
				if err != nil {
					return o.fail(err)
				}
				return printStats(env, st)
			})
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

// printStats prints the counts of st as a table, one row a kind and a
// total.
func printStats(env Env, st *rotaclient.Stats) error {
	header := []string{"KIND", "PAUSED"}
	for _, s := range statsColumns() {
		header = append(header, string(s))
	}
	header = append(header, "OLDEST_WAITING")
	t := newTable(env.Stdout, header...)
	for _, k := range st.Kinds {
		row := []any{k.Kind, k.Paused}
		for _, s := range statsColumns() {
			row = append(row, k.Counts[s])
		}
		t.row(append(row, time.Duration(k.OldestWaitingSeconds*float64(time.Second)).String())...)
	}
	row := []any{"TOTAL", ""}
	for _, s := range statsColumns() {
		row = append(row, st.Totals[s])
	}
	t.row(append(row, "")...)
	return t.flush()
}

// statsColumns are the status columns of rota stats: the statuses in
// lifecycle order, but WAITING (added with task dependencies) last, so
// that the columns scripts read keep their places.
func statsColumns() []rota.Status {
	var out []rota.Status
	for _, s := range rota.Statuses() {
		if s != rota.StatusWaiting {
			out = append(out, s)
		}
	}
	return append(out, rota.StatusWaiting)
}
