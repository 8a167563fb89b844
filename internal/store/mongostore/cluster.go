package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// leaderDoc is the leadership: who leads until when, under which fencing
// term (meta document "leader").
type leaderDoc struct {
	ID    string `bson:"_id"`
	V     int64  `bson:"v"`
	Node  string `bson:"node"`
	Term  int64  `bson:"term"`
	Until int64  `bson:"until"`
}

const leaderID = "leader"

func (s *Store) leader(ctx context.Context) (*leaderDoc, bool, error) {
	var l leaderDoc
	err := s.meta.FindOne(ctx, id(leaderID)).Decode(&l)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap("read leader", err)
	}
	return &l, true, nil
}

// LeaderAttemptElect implements store.Store: store.ElectLeader decides on
// the leader document read, and a compare-and-set of the document on its
// version applies the decision (an insert the first time: _id uniqueness
// lets one node win); a lost race reads again.
func (s *Store) LeaderAttemptElect(ctx context.Context, p store.LeaderElectParams) (store.LeaderElectResult, error) {
	for range maxCASAttempts {
		l, found, err := s.leader(ctx)
		if err != nil {
			return store.LeaderElectResult{}, err
		}
		var cur store.LeaderRow
		if found {
			cur = store.LeaderRow{NodeID: l.Node, Term: l.Term, ExpiresAt: l.Until}
		}
		next, changed := store.ElectLeader(cur, found, p)
		if !changed {
			return next.Result(p.NodeID), nil
		}
		doc := leaderDoc{ID: leaderID, V: 1, Node: next.NodeID, Term: next.Term, Until: next.ExpiresAt}
		if !found {
			_, err = s.meta.InsertOne(ctx, doc)
			if mongo.IsDuplicateKeyError(err) {
				continue
			}
			if err != nil {
				return store.LeaderElectResult{}, wrap("elect", err)
			}
			return next.Result(p.NodeID), nil
		}
		doc.V = l.V + 1
		ok, err := s.replaceVersioned(ctx, s.meta, leaderID, l.V, doc)
		if err != nil {
			return store.LeaderElectResult{}, err
		}
		if ok {
			return next.Result(p.NodeID), nil
		}
	}
	return store.LeaderElectResult{}, fmt.Errorf("mongostore: elect: too many concurrent elections")
}

// LeaderResign implements store.Store: the lease ends now (the term stays,
// so the next leader's is higher).
func (s *Store) LeaderResign(ctx context.Context, nodeID string) error {
	for range maxCASAttempts {
		l, found, err := s.leader(ctx)
		if err != nil || !found || l.Node != nodeID {
			return err
		}
		next := *l
		next.V, next.Node, next.Until = l.V+1, "", 0
		if ok, err := s.replaceVersioned(ctx, s.meta, leaderID, l.V, next); ok || err != nil {
			return err
		}
	}
	return fmt.Errorf("mongostore: resign: too many concurrent elections")
}

// fence checks a leader duty's term against the leader document. Without
// transactions the check precedes the duty's writes rather than holding a
// lock across them; the writes themselves are compare-and-sets, so a
// deposed leader that passed the check just before losing the lease can
// only do what the new leader would (end an expired run once).
func (s *Store) fence(ctx context.Context, want int64, now time.Time) error {
	if want == 0 {
		return nil
	}
	l, found, err := s.leader(ctx)
	if err != nil {
		return err
	}
	if !found {
		return store.CheckFence(want, false, 0, time.Time{}, now)
	}
	return store.CheckFence(want, true, l.Term, store.FromMillis(l.Until), now)
}

// nodeDoc is a live node.
type nodeDoc struct {
	ID      string `bson:"_id"`
	Addr    string `bson:"addr"`
	Version string `bson:"version"`
	Started int64  `bson:"started"`
	Last    int64  `bson:"last"`
}

// NodeHeartbeat implements store.Store.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	_, err := s.nodes.UpdateOne(ctx, id(p.NodeID), bson.D{{Key: "$set", Value: bson.D{{Key: "addr", Value: p.Address},
		{Key: "version", Value: p.Version}, {Key: "started", Value: store.Millis(p.StartedAt)}, {Key: "last", Value: store.Millis(p.Now)}}}},
		options.UpdateOne().SetUpsert(true))
	return wrap("node heartbeat", err)
}

// NodeList implements store.Store.
func (s *Store) NodeList(ctx context.Context, now time.Time, liveness time.Duration) ([]rota.Node, error) {
	docs, err := findAll[nodeDoc](ctx, s.nodes, bson.D{{Key: "last", Value: bson.D{{Key: "$gte", Value: store.Millis(now.Add(-liveness))}}}},
		"nodes", options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	l, found, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]rota.Node, len(docs))
	for i, n := range docs {
		out[i] = rota.Node{ID: n.ID, Address: n.Addr, Version: n.Version, StartedAt: store.FromMillis(n.Started),
			LastHeartbeat: store.FromMillis(n.Last), Leader: found && l.Node == n.ID && l.Until > store.Millis(now)}
	}
	return out, nil
}

// NodeRemove implements store.Store.
func (s *Store) NodeRemove(ctx context.Context, nodeID string) error {
	_, err := s.nodes.DeleteOne(ctx, id(nodeID))
	return wrap("remove node", err)
}
