package cli

import (
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
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
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if o.json() {
				return o.call(cmd.Context(), c, http.MethodGet, "/api/stats", nil)
			}
			st, err := c.Stats(cmd.Context())
			if err != nil {
				return o.fail(err)
			}
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
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
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
