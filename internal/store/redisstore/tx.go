package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota/internal/store"
)

//go:embed scripts/commit.lua
var commitSrc string

//go:embed scripts/events.lua
var eventsSrc string

//go:embed scripts/runread.lua
var runReadSrc string

var (
	commitScript  = redis.NewScript(commitSrc)
	eventsScript  = redis.NewScript(eventsSrc)
	runReadScript = redis.NewScript(runReadSrc)
)

// errConflict is a failed guard: the transaction runs again.
var errConflict = errors.New("redisstore: a record changed meanwhile")

// maxAttempts bounds the runs of one transaction under contention.
const maxAttempts = 200

// tx is one store transaction: guarded reads, then the writes that
// commit.lua applies at once if no record read has changed.
type tx struct {
	s      *Store
	ctx    context.Context
	keys   []string
	keyIdx map[string]int
	guards map[string]int64 // key → version read
	ops    []any
	fence  int64
	now    int64
	// after runs once the commit succeeded (results that must only be
	// reported for what was written).
	tasks map[string]*taskDoc // tasks read or written, by id
	// written holds the bodies put so far, so that later reads of the
	// same transaction see them.
	written map[string][]byte
	worker  *workerDoc // read by runread.lua for a heartbeat; nil if unknown
	// runTasks are the tasks of the runs read by runread.lua.
	runTasks map[string]string
	// kinds are the kinds a claim read up front (loadKinds).
	kinds map[string]kindState
	// fireNow is the Now of the ScheduleFire item being applied (unix ms).
	fireNow int64
}

// update runs fn in a transaction and commits it, again from the start
// while a guard fails. fn's error aborts (nothing written) unless it is a
// keepError: then the writes commit and the wrapped error is returned.
func (s *Store) update(ctx context.Context, op string, fn func(t *tx) error) error {
	for attempt := 0; ; attempt++ {
		t := &tx{s: s, ctx: ctx, keyIdx: map[string]int{}, guards: map[string]int64{}, tasks: map[string]*taskDoc{}, written: map[string][]byte{}}
		ferr := fn(t)
		var keep keepError
		if ferr != nil && !errors.As(ferr, &keep) {
			if errors.Is(ferr, errConflict) && attempt < maxAttempts {
				s.backoff(ctx, attempt)
				continue
			}
			return s.wrap(op, ferr)
		}
		err := t.commit()
		if errors.Is(err, errConflict) && attempt < maxAttempts {
			s.backoff(ctx, attempt)
			continue
		}
		if err != nil {
			return s.wrap(op, err)
		}
		if ferr != nil {
			return keep.err
		}
		return nil
	}
}

// backoff sleeps a little, more after repeated conflicts.
func (s *Store) backoff(ctx context.Context, attempt int) {
	if attempt < 2 {
		return
	}
	d := time.Duration(rand.N(min(attempt, 20))+1) * time.Millisecond
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// keepError is an error after which a transaction's writes still commit
// (a heartbeat that found its lease passed expires the run on the spot).
type keepError struct{ err error }

func (e keepError) Error() string { return e.err.Error() }

// key returns the index (from 1) of key k in KEYS.
func (t *tx) key(k string) int {
	if i, ok := t.keyIdx[k]; ok {
		return i
	}
	t.keys = append(t.keys, k)
	t.keyIdx[k] = len(t.keys)
	return len(t.keys)
}

// guard records that the commit needs key k still at version v.
func (t *tx) guard(k string, v int64) {
	if _, ok := t.guards[k]; !ok {
		t.guards[k] = v
	}
}

// doc is a record as read: its version (0: absent) and body.
type doc struct {
	v int64
	d []byte
}

// peekMany reads records without guarding them, in one round trip.
func (t *tx) peekMany(keys []string) ([]doc, error) {
	out := make([]doc, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err := t.s.rdb.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(t.ctx, k, "v", "d")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, c := range cmds {
		out[i] = parseDoc(c.Val())
	}
	return out, nil
}

func parseDoc(vals []any) doc {
	var d doc
	if s, ok := vals[0].(string); ok {
		d.v, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := vals[1].(string); ok {
		d.d = []byte(s)
	}
	return d
}

// get reads record k into v, guarded; found is false when it is absent.
func (t *tx) get(k string, v any) (found bool, err error) {
	if b, ok := t.written[k]; ok {
		if b == nil {
			return false, nil
		}
		return true, json.Unmarshal(b, v)
	}
	ds, err := t.peekMany([]string{k})
	if err != nil {
		return false, err
	}
	t.guard(k, ds[0].v)
	if ds[0].v == 0 || ds[0].d == nil {
		return false, nil
	}
	if err := json.Unmarshal(ds[0].d, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", k, err)
	}
	return true, nil
}

// put writes record k (its version increases).
func (t *tx) put(k string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", k, err)
	}
	t.ops = append(t.ops, "P", t.key(k), b)
	t.written[k] = b
	return nil
}

func (t *tx) bump(k string) { t.ops = append(t.ops, "B", t.key(k)) }
func (t *tx) del(k string) {
	t.ops = append(t.ops, "D", t.key(k))
	t.written[k] = nil
}
func (t *tx) hset(k, field string, v any)            { t.ops = append(t.ops, "H", t.key(k), field, v) }
func (t *tx) hmax(k, field string, v int64)          { t.ops = append(t.ops, "M", t.key(k), field, v) }
func (t *tx) hdel(k, field string)                   { t.ops = append(t.ops, "X", t.key(k), field) }
func (t *tx) zadd(k string, score float64, m string) { t.ops = append(t.ops, "Z", t.key(k), score, m) }
func (t *tx) zrem(k, m string)                       { t.ops = append(t.ops, "R", t.key(k), m) }
func (t *tx) rpush(k string, v any)                  { t.ops = append(t.ops, "L", t.key(k), v) }

// notify publishes a wake-up for the other nodes with the commit.
func (t *tx) notify(n store.Notification) {
	t.ops = append(t.ops, "N", t.s.channel, encodeNote(t.s.cfg.NodeID, n, false))
}

// notifySelf is notify for a change that this node's own dispatcher does
// not see from the call's result (a settled task claimable again, a place
// freed under a kind's MaxRunning cap): this node's Subscribe hears it too.
func (t *tx) notifySelf(n store.Notification) {
	t.ops = append(t.ops, "N", t.s.channel, encodeNote(t.s.cfg.NodeID, n, true))
}

// fenced makes the commit a leader duty of term at now (CheckFence).
func (t *tx) fenced(term int64, now time.Time) {
	t.fence, t.now = term, ms(now)
}

// commit runs commit.lua with the guards and writes; errConflict when a
// guard failed, store.ErrFenced when fenced.
func (t *tx) commit() error {
	if len(t.ops) == 0 && t.fence == 0 {
		return t.check()
	}
	args := []any{len(t.guards)}
	for k, v := range t.guards {
		args = append(args, t.key(k), v)
	}
	leader := 0
	if t.fence != 0 {
		leader = t.key(t.s.kLeader())
	}
	args = append(args, t.fence, leader, t.now)
	args = append(args, t.ops...)
	res, err := commitScript.Run(t.ctx, t.s.rdb, t.keys, args...).Result()
	if err != nil {
		return err
	}
	return t.result(res)
}

// check verifies the guards of a transaction that writes nothing, so that
// what it read is still one consistent state.
func (t *tx) check() error {
	if len(t.guards) == 0 {
		return nil
	}
	args := []any{len(t.guards)}
	for k, v := range t.guards {
		args = append(args, t.key(k), v)
	}
	args = append(args, 0, 0, 0)
	res, err := commitScript.Run(t.ctx, t.s.rdb, t.keys, args...).Result()
	if err != nil {
		return err
	}
	return t.result(res)
}

func (t *tx) result(res any) error {
	arr, ok := res.([]any)
	if !ok {
		return nil
	}
	switch arr[0] {
	case "CONFLICT":
		return errConflict
	case "FENCED":
		found, _ := arr[1].(int64)
		term, _ := arr[2].(int64)
		exp, _ := arr[3].(int64)
		return store.CheckFence(t.fence, found == 1, term, tm(exp), tm(t.now))
	}
	return fmt.Errorf("commit: unexpected reply %v", res)
}
