package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota/internal/buildinfo"
)

func newVersionCmd(env Env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version of this binary",
		Long: `Print which build of Rota this is: its version (a release, a Go pseudo-version, or
"(devel)"), the git commit and build date ("unknown" when the build did not record them)
and the Go version. -o json prints {"version","commit","build_date","go_version"}, the
same data as a server's GET /api/version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags(), env.Getenv); err != nil {
				return err
			}
			info := buildinfo.Get()
			switch output {
			case "text":
				_, err := fmt.Fprintln(env.Stdout, info)
				return err
			case "json":
				raw, err := json.Marshal(info)
				if err != nil {
					return fmt.Errorf("encode version: %w", err)
				}
				return writeJSON(env.Stdout, raw)
			}
			return usageError("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	annotateEnv(cmd)
	return cmd
}
