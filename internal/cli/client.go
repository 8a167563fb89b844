package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// defaultServer is the server the client commands talk to by default.
const defaultServer = "http://127.0.0.1:8080"

// apiOpts are the flags of every command that talks to a server.
type apiOpts struct {
	server string
	token  string
	output string // "table" or "json"
	env    Env
	// fields maps API field names to the flags that set them, so that an
	// invalid-input error names the flag too.
	fields map[string]string
}

// addAPIFlags registers --server and, when withOutput, -o/--output.
func addAPIFlags(cmd *cobra.Command, o *apiOpts, withOutput bool) {
	cmd.Flags().StringVar(&o.server, "server", defaultServer, "URL of the Rota server")
	cmd.Flags().StringVar(&o.token, "token", "", "API token of the server, if it requires one")
	if withOutput {
		cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table (for people) or json (the API's data, for scripts)")
	}
}

// prepare reads the environment into unset flags and checks the output
// format; every client command calls it first.
func (o *apiOpts) prepare(cmd *cobra.Command) error {
	if err := bindEnv(cmd.Flags(), o.env.Getenv); err != nil {
		return err
	}
	switch o.output {
	case "", "table", "json":
	default:
		return usageError("--output %q: want table or json", o.output)
	}
	return nil
}

func (o *apiOpts) json() bool { return o.output == "json" }

// client returns a client for --server.
func (o *apiOpts) client() (*rotaclient.Client, error) {
	c, err := rotaclient.New(rotaclient.Config{BaseURL: o.server, UserAgent: "rota-cli", Token: o.token})
	if err != nil {
		return nil, usageError("--server %q: want a URL such as %s", o.server, defaultServer)
	}
	return c, nil
}

// fail turns an error of the client into one with the exit code scripts
// can trust: 3 not found, 4 conflict (and lost lease), 2 invalid input, 1
// anything else. The server's message is kept; the flag at fault is named.
func (o *apiOpts) fail(err error) error {
	if err == nil {
		return nil
	}
	var re *rota.Error
	if errors.As(err, &re) {
		code := ExitError
		switch re.Code {
		case rota.CodeNotFound:
			code = ExitNotFound
		case rota.CodeConflict, rota.CodeLeaseLost:
			code = ExitConflict
		case rota.CodeInvalid, rota.CodeMalformed, rota.CodeUnknownField:
			code = ExitUsage
		}
		msg := re.Error()
		if flag, ok := o.fields[re.Field]; ok && re.Field != "" {
			msg += " (flag --" + flag + ")"
		}
		return &exitError{code: code, err: errors.New(msg)}
	}
	var ue *url.Error
	if errors.As(err, &ue) && !errors.Is(err, context.Canceled) {
		return &exitError{code: ExitError, err: fmt.Errorf("cannot reach the Rota server at %s (set --server or ROTA_SERVER): %v", o.server, ue.Err)}
	}
	return &exitError{code: ExitError, err: err}
}

// call runs a request for -o json and prints the data of the response
// envelope, indented.
func (o *apiOpts) call(ctx context.Context, c *rotaclient.Client, method, path string, body any) error {
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, body, &raw); err != nil {
		return o.fail(err)
	}
	return writeJSON(o.env.Stdout, raw)
}

// read runs a command that reads: with -o json it prints the data of GET
// path as the server sent it, else render prints it for people.
func (o *apiOpts) read(cmd *cobra.Command, path string, render func(ctx context.Context, c *rotaclient.Client) error) error {
	if err := o.prepare(cmd); err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	if o.json() {
		return o.call(cmd.Context(), c, http.MethodGet, path, nil)
	}
	return render(cmd.Context(), c)
}

func writeJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, cell(c))
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// cell formats one table cell: times in UTC RFC 3339, "-" for nothing,
// one line only.
func cell(v any) string {
	var s string
	switch x := v.(type) {
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.UTC().Format(time.RFC3339)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case []string:
		s = strings.Join(x, ",")
	case string:
		s = x
	default:
		s = fmt.Sprint(x)
	}
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\t", " ")), " ")
	if s == "" {
		return "-"
	}
	return s
}

// short cuts s to n runes for a table cell.
func short(s string, n int) string {
	s = cell(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// secondsValue is a flag holding whole seconds, given as "30", "30s",
// "5m" or "1h30m" (rounded up to the second).
type secondsValue struct{ n *int }

func (s secondsValue) String() string {
	if s.n == nil || *s.n == 0 {
		return "0"
	}
	return (time.Duration(*s.n) * time.Second).String()
}

func (s secondsValue) Set(v string) error {
	n, err := parseSeconds(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}

func (secondsValue) Type() string { return "duration" }

func parseSeconds(v string) (int, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, errors.New("must not be negative")
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want seconds or a duration such as 30s, 5m, 1h30m")
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return int((d + time.Second - 1) / time.Second), nil
}

// formatSeconds shows a number of seconds as a compact duration (90 →
// "1m30s", 86400 → "24h"); 0 is "none".
func formatSeconds(n int) string {
	if n <= 0 {
		return "none"
	}
	s := (time.Duration(n) * time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// exactArgs is cobra.ExactArgs with a message that names what is missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError("%s: want %d argument(s): %s (see --help)", cmd.CommandPath(), len(names), strings.Join(names, " "))
		}
		return nil
	}
}

// pathEscape makes s one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }
