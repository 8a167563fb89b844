package store

import (
	"fmt"
	"slices"

	"github.com/rotahq/rota"
)

// DepIDs resolves the dependencies of item i of an insert: p.DependsOn
// and the ids of the earlier items p.DependsOnItems names (prior holds the
// results of items 0..i-1), without duplicates. An index that is not of an
// earlier item is rota.ErrInvalid on depends_on.
func DepIDs(p TaskInsertParams, i int, prior []TaskInsertResult) ([]string, error) {
	ids := make([]string, 0, len(p.DependsOn)+len(p.DependsOnItems))
	ids = append(ids, p.DependsOn...)
	for _, j := range p.DependsOnItems {
		if j < 0 || j >= i || j >= len(prior) || prior[j].Task == nil {
			return nil, &ItemError{Index: i, Err: rota.Invalid("depends_on", "item %d can only depend on an earlier item, not on item %d", i, j)}
		}
		ids = append(ids, prior[j].Task.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// DepStart is how a new task with dependencies starts.
type DepStart struct {
	Waiting int    // dependencies not yet succeeded (status WAITING when > 0)
	Failed  string // when not "": the task is CANCELED at once with this message
}

// ItemError is the error of item Index of a TaskInsertMany, so that the
// API can name the item at fault; it unwraps to Err.
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("item %d: %v", e.Index, e.Err) }

// Unwrap returns Err.
func (e *ItemError) Unwrap() error { return e.Err }

// StartWithDeps decides how item i of an insert, depending on ids, starts,
// given the status of each dependency found (a missing one is
// rota.ErrInvalid on depends_on, in an ItemError).
func StartWithDeps(i int, ids []string, status map[string]rota.Status) (DepStart, error) {
	var st DepStart
	for _, id := range ids {
		s, ok := status[id]
		switch {
		case !ok:
			return DepStart{}, &ItemError{Index: i, Err: rota.Invalid("depends_on", "names task %s, which does not exist", id)}
		case s == rota.StatusSuccess:
		case s.Terminal():
			if st.Failed == "" {
				st.Failed = DepFailedMessage(id, s)
			}
		default:
			st.Waiting++
		}
	}
	return st, nil
}

// DepFailedMessage is the message of a task canceled because its
// dependency id ended with status s.
func DepFailedMessage(id string, s rota.Status) string {
	return fmt.Sprintf("%s: task %s ended %s", DependencyFailed, id, s)
}
