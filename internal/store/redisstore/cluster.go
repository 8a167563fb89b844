package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/storecost"
)

// LeaderAttemptElect implements store.Store: the leader hash (node,
// term, lease end; versioned) is read, store.ElectLeader decides (the rule
// every backend shares, registry terms included) and commit.lua writes the
// new row if the hash has not changed meanwhile. Terms only grow: the
// hash's term is the fencing counter, and fenced writes check it in their
// own commit.
func (s *Store) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	var res store.LeaderElectResult
	err := s.update(ctx, "elect", func(t *tx) error {
		cur, found, err := t.leaderRow()
		if err != nil {
			return err
		}
		next, changed := store.ElectLeader(cur, found, p)
		if changed {
			t.putLeader(next)
		}
		res = next.Result(p.NodeID)
		return nil
	})
	return res, err
}

// LeaderResign implements store.Store: the lease of nodeID, if it leads,
// ends now (its term stays, so it is fenced).
func (s *Store) LeaderResign(ctx context.Context, nodeID string) error {
	return s.update(ctx, "resign", func(t *tx) error {
		cur, found, err := t.leaderRow()
		if err != nil || !found || cur.NodeID != nodeID {
			return err
		}
		cur.ExpiresAt = 0
		t.putLeader(cur)
		return nil
	})
}

func (s *Store) kLeader() string { return s.p + "leader" }

// leaderRow reads the leader hash, guarded.
func (t *tx) leaderRow() (store.LeaderRow, bool, error) {
	vals, err := t.s.rdb.HMGet(t.ctx, t.s.kLeader(), "v", "node", "term", "exp").Result()
	if err != nil {
		return store.LeaderRow{}, false, err
	}
	v, _ := strconv.ParseInt(str(vals[0]), 10, 64)
	t.guard(t.s.kLeader(), v)
	if vals[1] == nil {
		return store.LeaderRow{}, false, nil
	}
	row := store.LeaderRow{NodeID: str(vals[1])}
	row.Term, _ = strconv.ParseInt(str(vals[2]), 10, 64)
	row.ExpiresAt, _ = strconv.ParseInt(str(vals[3]), 10, 64)
	return row, true, nil
}

// putLeader writes the leader hash (the fields commit.lua's fence reads).
func (t *tx) putLeader(r store.LeaderRow) {
	k := t.s.kLeader()
	t.hset(k, "node", r.NodeID)
	t.hset(k, "term", r.Term)
	t.hset(k, "exp", r.ExpiresAt)
	t.bump(k)
}

// nodeDoc is a node's record.
type nodeDoc struct {
	ID      string `json:"id"`
	Address string `json:"addr"`
	Version string `json:"ver"`
	Started int64  `json:"st"`
	Seen    int64  `json:"seen"`
}

// NodeHeartbeat implements store.Store: one record per node, and the
// nodes sorted set scored by the last heartbeat.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	return s.update(ctx, "node heartbeat", func(t *tx) error {
		t.zadd(s.p+"nodes", float64(ms(p.Now)), p.NodeID)
		return t.put(s.p+"n:"+p.NodeID, nodeDoc{ID: p.NodeID, Address: p.Address, Version: p.Version,
			Started: ms(p.StartedAt), Seen: ms(p.Now)})
	})
}

// NodeList implements store.Store.
func (s *Store) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.p+"nodes", &redis.ZRangeBy{Min: fmt.Sprint(ms(now.Add(-liveness))), Max: "+inf"}).Result()
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	l, err := s.rdb.HMGet(ctx, s.p+"leader", "node", "exp").Result()
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	leader, _ := l[0].(string)
	var exp int64
	if v, ok := l[1].(string); ok {
		fmt.Sscan(v, &exp)
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.p + "n:" + id
	}
	var out []rota.Node
	err = s.readDocs(ctx, keys, func(_ int, b []byte) error {
		var n nodeDoc
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		out = append(out, rota.Node{ID: n.ID, Address: n.Address, Version: n.Version, StartedAt: tm(n.Started),
			LastHeartbeat: tm(n.Seen), Leader: n.ID == leader && exp > ms(now)})
		return nil
	})
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	sortBy(out, func(n rota.Node) string { return n.ID })
	return out, nil
}

// NodeRemove implements store.Store.
func (s *Store) NodeRemove(ctx context.Context, nodeID string) error {
	return s.update(ctx, "remove node", func(t *tx) error {
		t.zrem(s.p+"nodes", nodeID)
		t.del(s.p + "n:" + nodeID)
		return nil
	})
}

// readDocs reads the bodies of the records keys in one round trip and
// calls fn with each present one (index in keys, body).
func (s *Store) readDocs(ctx context.Context, keys []string, fn func(i int, b []byte) error) error {
	if len(keys) == 0 {
		return nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGet(ctx, k, "d")
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return err
	}
	for i, c := range cmds {
		b, err := c.Bytes()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(i, b); err != nil {
			return fmt.Errorf("decode %s: %w", keys[i], err)
		}
	}
	return nil
}

// --- wake-ups --------------------------------------------------------------

// note is a Notification as published.
type note struct {
	Node   string `json:"n,omitempty"`
	Kind   string `json:"k,omitempty"`
	RunAt  int64  `json:"r,omitempty"`
	Events bool   `json:"e,omitempty"`
	// Self: the sending node hears it too (see tx.notifySelf).
	Self bool `json:"s,omitempty"`
}

func encodeNote(node string, n store.Notification, self bool) string {
	b, _ := json.Marshal(note{Node: node, Kind: n.Kind, RunAt: ms(n.RunAt), Events: n.Events, Self: self})
	return string(b)
}

// SupportsNotify is true: nodes sharing the Redis hear of each other's
// changes through pub/sub.
func (s *Store) SupportsNotify() bool { return true }

// Subscribe implements store.Store: it subscribes to the prefix's channel
// and calls fn for every notification of the other nodes, and for those of
// this node (Config.NodeID) that its callers cannot know of
// (tx.notifySelf): a node's dispatcher wakes its own waiters when it
// submits or completes, and an echo would only send them claiming again
// for nothing. A store without a NodeID hears everything. When the connection drops it
// subscribes again with backoff and, as notifications sent meanwhile are
// lost, then calls fn once per known kind (zero RunAt) so that receivers
// look again. It returns nil when ctx ends or the store is closed.
func (s *Store) Subscribe(ctx context.Context, fn func(store.Notification)) error {
	ctx, cancel := context.WithCancel(storecost.Async(ctx))
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := s.listen(ctx, fn, attempt > 0)
		if ctx.Err() != nil {
			return nil
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("redisstore: subscription lost; subscribing again", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// listen subscribes once and delivers until the subscription fails;
// after a loss (resume) it wakes every kind once subscribed.
func (s *Store) listen(ctx context.Context, fn func(store.Notification), resume bool) error {
	ps := s.rdb.Subscribe(ctx, s.channel)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // a blocked receive ends with ctx
	defer stop()
	if _, err := ps.Receive(ctx); err != nil {
		return err
	}
	if resume {
		kinds, err := s.rdb.ZRange(ctx, s.kKinds(), 0, -1).Result()
		if err != nil {
			return err
		}
		for _, k := range kinds {
			fn(store.Notification{Kind: k})
		}
		fn(store.Notification{Events: true})
	}
	for {
		msg, err := ps.ReceiveTimeout(ctx, 30*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTimeout(err) {
				if err := ps.Ping(ctx); err != nil {
					return err
				}
				continue
			}
			return err
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		var n note
		if json.Unmarshal([]byte(m.Payload), &n) != nil || (s.cfg.NodeID != "" && n.Node == s.cfg.NodeID && !n.Self) {
			continue
		}
		fn(store.Notification{Kind: n.Kind, RunAt: tm(n.RunAt), Events: n.Events})
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}

// sortBy sorts xs by key.
func sortBy[T any](xs []T, key func(T) string) {
	slices.SortFunc(xs, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}
