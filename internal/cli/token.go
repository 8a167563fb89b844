package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaapi"
	"github.com/rotahq/rota/rotaclient"
)

func newTokenCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (admin)",
		Long: `Create, list and revoke the API tokens of a server that requires authentication
(rota server --auth-token). Each token has a role:

  reader      every GET, the event stream, the metrics
  submitter   reader + submit tasks
  worker      reader + the worker protocol (claim, heartbeat, reports, release)
  operator    everything but tokens and the audit log
  admin       everything

A submitter or worker token may be confined to some kinds (--kind). These
commands need an admin token (--token or ROTA_TOKEN).

Exit codes: 0 ok, 1 error, 2 bad usage or input rejected by the server, 3 no such token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTokenCreateCmd(env), newTokenListCmd(env), newTokenRevokeCmd(env))
	return cmd
}

func unixCell(sec int64) any {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func newTokenCreateCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env, fields: map[string]string{"name": "name", "role": "role", "kinds": "kind"}}
	var (
		name, role string
		kinds      []string
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME --role ROLE [--kind K]...",
		Short: "Create a token and print its secret (shown only once)",
		Example: `  rota token create --name ci --role submitter
  rota token create --name mailer --role worker --kind email --kind sms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			body := rotaapi.TokenCreateRequest{Name: name, Role: rota.Role(role), Kinds: kinds}
			if o.json() {
				return o.call(cmd.Context(), c, http.MethodPost, "/api/tokens", body)
			}
			var t rotaapi.TokenCreateResponse
			if err := c.Do(cmd.Context(), http.MethodPost, "/api/tokens", body, &t); err != nil {
				return o.fail(err)
			}
			_, err = fmt.Fprintf(env.Stdout, "token %s (%s, role %s) created; its secret, shown only now:\n%s\n", t.TokenID, t.Name, t.Role, t.Token)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the token's name (the actor of its audit records)")
	cmd.Flags().StringVar(&role, "role", "", "reader, submitter, worker, operator or admin")
	cmd.Flags().StringArrayVar(&kinds, "kind", nil, "confine a submitter or worker token to this kind (repeat for more)")
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func newTokenListCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.read(cmd, "/api/tokens", func(ctx context.Context, c *rotaclient.Client) error {
				var data rotaapi.TokenList
				if err := c.Do(ctx, http.MethodGet, "/api/tokens", nil, &data); err != nil {
					return o.fail(err)
				}
				t := newTable(env.Stdout, "TOKEN_ID", "NAME", "ROLE", "KINDS", "CREATED", "REVOKED")
				for _, tk := range data.Tokens {
					t.row(tk.TokenID, tk.Name, tk.Role, tk.Kinds, unixCell(tk.CreatedAt), unixCell(tk.RevokedAt))
				}
				return t.flush()
			})
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

func newTokenRevokeCmd(env Env) *cobra.Command {
	o := &apiOpts{env: env}
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke a token: every node refuses it within 5 s",
		Args:  exactArgs("TOKEN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/api/tokens/" + url.PathEscape(args[0])
			if o.json() {
				return o.call(cmd.Context(), c, http.MethodDelete, path, nil)
			}
			var t json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodDelete, path, nil, &t); err != nil {
				return o.fail(err)
			}
			_, err = fmt.Fprintf(env.Stdout, "token %s revoked\n", args[0])
			return err
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}
