package cli

import (
	"context"
	"fmt"
	"io"
	"iter"

	"github.com/spf13/cobra"

	"github.com/rotahq/rota/rotaclient"
)

// oneRef describes a command that names one thing (an id or a name), sends
// one request about it and prints the answer: with -o json the API's data
// as it came, otherwise do's result through show.
type oneRef[T any] struct {
	Use, Short, Long string
	Arg              string // the argument's name in usage errors
	Method           string // of the request -o json repeats
	Path             func(ref string) string
	Do               func(c *rotaclient.Client, ctx context.Context, ref string) (T, error) // a method expression
	Show             func(w io.Writer, v T) error
}

// newOneRefCmd builds the command r describes.
func newOneRefCmd[T any](env Env, r oneRef[T]) *cobra.Command {
	o := &apiOpts{env: env}
	cmd := &cobra.Command{
		Use:   r.Use,
		Short: r.Short,
		Long:  r.Long,
		Args:  exactArgs(r.Arg),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if o.json() {
				return o.call(cmd.Context(), c, r.Method, r.Path(args[0]), nil)
			}
			v, err := r.Do(c, cmd.Context(), args[0])
			if err != nil {
				return o.fail(err)
			}
			return r.Show(env.Stdout, v)
		},
	}
	addAPIFlags(cmd, o, true)
	annotateEnv(cmd)
	return cmd
}

// printLine prints a string and a newline (an id, say).
func printLine(w io.Writer, s string) error {
	_, err := fmt.Fprintln(w, s)
	return err
}

// refPath is the API path of a thing or an action on it: prefix + ref + suffix.
func refPath(prefix, suffix string) func(string) string {
	return func(ref string) string { return prefix + pathEscape(ref) + suffix }
}

// listing is a paged list printed as a table: with all, every item of
// each; otherwise the one page that page reads, then the command for the
// next page (more, followed by its cursor) on standard error.
type listing[T any] struct {
	header []string
	row    func(*table, *T)
	all    bool
	each   iter.Seq2[T, error]
	page   func() (items []T, next string, err error)
	more   string
}

// printListing prints l for the command o runs.
func printListing[T any](o *apiOpts, l listing[T]) error {
	t := newTable(o.env.Stdout, l.header...)
	if l.all {
		for v, err := range l.each {
			if err != nil {
				t.flush()
				return o.fail(err)
			}
			l.row(t, &v)
		}
		return t.flush()
	}
	items, next, err := l.page()
	if err != nil {
		return o.fail(err)
	}
	for i := range items {
		l.row(t, &items[i])
	}
	if err := t.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(o.env.Stderr, "more: %s --cursor %s\n", l.more, next)
	}
	return nil
}
