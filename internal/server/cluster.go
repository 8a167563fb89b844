package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rotahq/rota/internal/store"
)

// membership keeps this node registered in the store and competes for the
// leader lease. The leader runs the cluster's periodic duties; the others
// stand by and take over within one lease after the leader dies.
type membership struct {
	srv  *Server // immutable
	ttl  time.Duration
	tick time.Duration

	mu       sync.Mutex // guards the fields below
	leader   bool
	term     int64
	leaseEnd time.Time
	onChange []func(leader bool)
}

// defaultNodeID is host-pid-random: unique and readable.
func defaultNodeID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "rota"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// IsLeader reports whether this node currently holds the leader lease.
func (m *membership) IsLeader() (bool, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leader && m.srv.cfg.Clock.Now().Before(m.leaseEnd), m.term
}

// OnLeaderChange registers fn to be called (from the membership loop) when
// this node gains or loses leadership.
func (m *membership) OnLeaderChange(fn func(leader bool)) {
	m.mu.Lock()
	m.onChange = append(m.onChange, fn)
	m.mu.Unlock()
}

func (m *membership) run(ctx context.Context) {
	c := m.srv.cfg.Clock
	for {
		m.once(ctx)
		t := c.NewTimer(m.tick)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// once heartbeats the node and runs one election round.
func (m *membership) once(ctx context.Context) {
	s := m.srv
	now := s.cfg.Clock.Now()
	if err := s.store.NodeHeartbeat(ctx, store.NodeHeartbeatParams{
		NodeID: s.cfg.NodeID, Address: s.advertise(), Version: Version, StartedAt: s.started, Now: now,
	}); err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("node heartbeat", "err", err)
	}
	res, err := s.store.LeaderAttemptElect(ctx, store.LeaderElectParams{NodeID: s.cfg.NodeID, TTL: m.ttl, Now: now})
	leader := err == nil && res.Leader
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("leader election", "err", err)
		}
		// Keep leading only while the lease we hold is certainly ours.
		m.mu.Lock()
		leader = m.leader && now.Before(m.leaseEnd)
		m.mu.Unlock()
	}
	m.mu.Lock()
	changed := leader != m.leader
	m.leader = leader
	if err == nil {
		m.term = res.Term
		if leader {
			// Stop acting as leader two election ticks before the lease
			// ends (IsLeader checks it before every duty round), so that a
			// successor, who must wait for the whole lease, never overlaps
			// with us even if this loop stalls for a tick.
			m.leaseEnd = now.Add(m.ttl - 2*m.tick)
		}
	}
	hooks := append([]func(bool){}, m.onChange...)
	term := m.term
	m.mu.Unlock()
	if changed {
		s.cfg.Logger.Info("leadership changed", "node", s.cfg.NodeID, "leader", leader, "term", term,
			"at_ms", now.UnixMilli())
		for _, fn := range hooks {
			fn(leader)
		}
	}
}

// resign gives up leadership and leaves the node list on a graceful stop.
func (m *membership) resign(ctx context.Context) {
	s := m.srv
	m.mu.Lock()
	wasLeader := m.leader
	m.leader = false
	hooks := append([]func(bool){}, m.onChange...)
	m.mu.Unlock()
	if wasLeader {
		for _, fn := range hooks {
			fn(false)
		}
		if err := s.store.LeaderResign(ctx, s.cfg.NodeID); err != nil {
			s.cfg.Logger.Warn("resign leadership", "err", err)
		}
	}
	if err := s.store.NodeRemove(ctx, s.cfg.NodeID); err != nil {
		s.cfg.Logger.Warn("leave node list", "err", err)
	}
}
