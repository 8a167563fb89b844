package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newHealthcheckCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the server answers GET /api/healthz, 1 if not",
		Long: `Ask --server for GET /api/healthz (liveness) and exit 0 when it answers ok, 1 when
it does not answer within --timeout or answers an error. It is the container image's
HEALTHCHECK (the image has no shell and no curl); --ready asks GET /api/readyz instead,
which also checks the store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			ready, _ := cmd.Flags().GetBool("ready")
			if timeout <= 0 {
				return usageError("--timeout %s: want a positive duration", timeout)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			check, what := c.Health, "healthz"
			if ready {
				check, what = c.Ready, "readyz"
			}
			if err := check(ctx); err != nil {
				// Always 1, whatever the cause: a container runtime reads
				// any other code as an error of the check itself.
				return &exitError{code: ExitError, err: fmt.Errorf("%s %s: %w", o.server, what, err)}
			}
			_, err = fmt.Fprintln(env.Stdout, "ok")
			return err
		},
	}
	addAPIFlags(cmd, o, false)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	cmd.Flags().Bool("ready", false, "check readiness (GET /api/readyz, the store included) instead of liveness")
	annotateEnv(cmd)
	return cmd
}
