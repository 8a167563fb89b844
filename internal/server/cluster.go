package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/rotahq/rota/internal/leadership"
	"github.com/rotahq/rota/internal/store"
)

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

// newElector creates this node's cluster membership: its heartbeat (with
// the address s advertises and its version) and the leader election. The
// leader runs the periodic duties; their writes carry its term.
func (s *Server) newElector(st store.Store) (*leadership.Elector, error) {
	return leadership.New(leadership.Config{
		Store: st, NodeID: s.cfg.NodeID, Address: s.advertise, Version: s.cfg.Version,
		TTL: s.cfg.LeaderLease, Clock: s.cfg.Clock, Logger: s.cfg.Logger,
	})
}

// fencingTerm is the term the leader-only writes of this node carry (see
// store.CheckFence).
func (s *Server) fencingTerm() int64 {
	term, _ := s.elector.Leading()
	return term
}
