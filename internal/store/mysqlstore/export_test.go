package mysqlstore

import (
	"context"
	"fmt"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// CompleteGroup applies reports as one group of the completer would (one
// transaction), bypassing the queue, so that tests reach the group path
// whatever the timing.
func CompleteGroup(s *Store, ctx context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error) {
	group := make([]*report, len(ps))
	for i, p := range ps {
		group[i] = &report{ctx: ctx, p: p, done: make(chan struct{})}
	}
	s.completeGroup(group)
	tasks, errs := make([]*rota.Task, len(ps)), make([]error, len(ps))
	for i, r := range group {
		tasks[i], errs[i] = r.task, r.err
	}
	return tasks, errs
}

// RowWrites returns the rows the store's connection has written so far
// (its session's Handler_write, Handler_update and Handler_delete), under
// the key "all": MySQL counts them per session, not per table. The store
// must have been opened with MaxConns 1, so that every statement it sends
// (and this one) runs on that connection. Rows written to internal
// temporary tables are not counted (MariaDB counts them apart, in
// Handler_tmp_*); an update that changes nothing is not counted; an
// INSERT … ON DUPLICATE KEY UPDATE that finds its row counts as a write
// attempt and an update.
func RowWrites(s *Store, ctx context.Context) (map[string]storecost.Rows, error) {
	if s.cfg.MaxConns != 1 {
		return nil, fmt.Errorf("RowWrites needs a store of one connection (MaxConns %d)", s.cfg.MaxConns)
	}
	rows, err := s.db.QueryContext(ctx, `SHOW SESSION STATUS WHERE Variable_name IN ('Handler_write', 'Handler_update', 'Handler_delete')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var r storecost.Rows
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		switch name {
		case "Handler_write":
			r.Inserted = v
		case "Handler_update":
			r.Updated = v
		case "Handler_delete":
			r.Deleted = v
		}
	}
	return map[string]storecost.Rows{"all": r}, rows.Err()
}
