package pgstore

import (
	"context"
	"net"

	"github.com/rotahq/rota/internal/store"
)

// Single submits are the hottest write after reports: each would be a
// transaction of its own, waiting for its own WAL flush, so that the rate
// of single submits were bounded by the pool size divided by the flush
// time. As reports do (complete.go), small requests of unkeyed tasks wait
// for one of a few inserters instead, and an inserter takes every request
// that queued while it was busy and inserts them all in one transaction
// (one statement, one commit). When the node is idle a request finds an
// inserter waiting and goes alone, with no added delay; under load the
// groups grow with the load. A request is answered once its group has
// committed: acknowledged still means durable.
//
// Keyed inserts are left out (their insert-or-fetch loop may take more
// round trips, and two requests of one key must see each other committed
// as they would alone), as are batches larger than maxGroupedRequest.

// inserters is how many groups of inserts may be in flight at once: one
// gathers while another commits.
const inserters = 2

// maxGroupedRequest is the largest request (in tasks) that joins groups.
// Larger batches already share their commit among their tasks, and
// grouping them would funnel them through the few inserters, where alone
// they use the whole pool (measured with `rota bench --scenario submit`:
// batches of 100 from 32 clients were slower grouped).
const maxGroupedRequest = 10

// maxInsertGroup caps the tasks of a group (one statement's arrays).
const maxInsertGroup = 1000

// insertReq is one request waiting for an inserter. res has room for the
// answer, which an inserter always sends.
type insertReq struct {
	ctx context.Context
	ps  []store.TaskInsertParams
	res chan insertRes
}

type insertRes struct {
	out []store.TaskInsertResult
	err error
}

// groupable reports whether a request may join a group: small, unkeyed.
func groupable(ps []store.TaskInsertParams) bool {
	if len(ps) > maxGroupedRequest {
		return false
	}
	for _, p := range ps {
		if p.Key != "" {
			return false
		}
	}
	return true
}

// insertGrouped inserts ps in the next group of an inserter.
func (s *Store) insertGrouped(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	req := &insertReq{ctx: ctx, ps: ps, res: make(chan insertRes, 1)}
	select {
	case s.insertQ <- req:
	case <-ctx.Done():
		return nil, s.translate("insert tasks", ctx.Err())
	case <-s.closed:
		return nil, s.translate("insert tasks", net.ErrClosed)
	}
	// An inserter answers every request it took, commit or not; waiting
	// here (and not on ctx) means a caller is never told that an insert
	// failed when it committed.
	r := <-req.res
	return r.out, r.err
}

// inserter inserts groups of requests until the store closes.
func (s *Store) inserter() {
	defer s.insertersDone.Done()
	serveGroups(s, s.insertQ, maxInsertGroup, func(r *insertReq) int { return len(r.ps) }, s.insertGroup)
}

// insertGroup inserts a group of requests in one transaction and answers
// each of them. If that transaction fails (one request's task id is taken,
// one payload is refused, the connection is lost), nothing of it committed
// and each request goes again in a transaction of its own, so that one
// request's trouble is only its own.
func (s *Store) insertGroup(group []*insertReq) {
	live := liveRequests(group, func(r *insertReq) context.Context { return r.ctx },
		func(r *insertReq, err error) { r.res <- insertRes{err: s.translate("insert tasks", err)} })
	switch len(live) {
	case 0:
		return
	case 1:
		out, err := s.insertNoDeps(live[0].ctx, live[0].ps)
		live[0].res <- insertRes{out, err}
		return
	}
	var all []store.TaskInsertParams
	for _, r := range live {
		all = append(all, r.ps...)
	}
	// Once the group is taken its requests wait for its outcome whatever
	// their contexts do (see insertGrouped).
	out, err := s.insertNoDeps(context.WithoutCancel(live[0].ctx), all)
	if err != nil {
		for _, r := range live {
			out, err := s.insertNoDeps(r.ctx, r.ps)
			r.res <- insertRes{out, err}
		}
		return
	}
	for _, r := range live {
		r.res <- insertRes{out: out[:len(r.ps):len(r.ps)]}
		out = out[len(r.ps):]
	}
}
