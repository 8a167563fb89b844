package store

import (
	"slices"
	"strings"
	"time"
)

// MaxPinnedGroups bounds the groups TaskPinnedWaiting returns.
const MaxPinnedGroups = 1000

// PinnedWaiting is a group of claimable tasks of one kind pinned to the
// same workers.
type PinnedWaiting struct {
	Kind      string
	WorkerIDs []string  // sorted
	Oldest    time.Time // the earliest ready time of the group
}

// MergePinned merges groups whose worker sets are equal once sorted,
// keeping the oldest time, ordered by kind then workers.
func MergePinned(in []PinnedWaiting) []PinnedWaiting {
	byKey := map[string]int{}
	var out []PinnedWaiting
	for _, g := range in {
		ids := slices.Clone(g.WorkerIDs)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		key := g.Kind + "\x00" + strings.Join(ids, "\x00")
		if i, ok := byKey[key]; ok {
			if g.Oldest.Before(out[i].Oldest) {
				out[i].Oldest = g.Oldest
			}
			continue
		}
		byKey[key] = len(out)
		out = append(out, PinnedWaiting{Kind: g.Kind, WorkerIDs: ids, Oldest: g.Oldest})
	}
	slices.SortFunc(out, func(x, y PinnedWaiting) int {
		if c := strings.Compare(x.Kind, y.Kind); c != 0 {
			return c
		}
		return slices.Compare(x.WorkerIDs, y.WorkerIDs)
	})
	return out
}
