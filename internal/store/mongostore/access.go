package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

type tokenDoc struct {
	ID      string   `bson:"_id"`
	Name    string   `bson:"name"`
	Role    string   `bson:"role"`
	Kinds   []string `bson:"kinds"`
	Hash    string   `bson:"hash"`
	Created int64    `bson:"created"`
	Revoked int64    `bson:"revoked"`
}

func (t *tokenDoc) token() *rota.Token {
	out := &rota.Token{ID: t.ID, Name: t.Name, Role: rota.Role(t.Role), Hash: t.Hash,
		CreatedAt: store.FromMillis(t.Created), RevokedAt: store.FromMillis(t.Revoked)}
	if len(t.Kinds) > 0 {
		out.Kinds = t.Kinds
	}
	return out
}

// TokenInsert implements store.Store.
func (s *Store) TokenInsert(ctx context.Context, t rota.Token) error {
	n, err := s.tokens.CountDocuments(ctx, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "_id", Value: t.ID}},
		bson.D{{Key: "hash", Value: t.Hash}}, bson.D{{Key: "name", Value: t.Name}, {Key: "revoked", Value: int64(0)}}}}})
	if err != nil {
		return wrap("insert token", err)
	}
	if n > 0 {
		return store.ConflictError("a token named %q (or with this id) already exists", t.Name)
	}
	_, err = s.tokens.InsertOne(ctx, tokenDoc{ID: t.ID, Name: t.Name, Role: string(t.Role), Kinds: t.Kinds, Hash: t.Hash,
		Created: store.Millis(t.CreatedAt), Revoked: store.Millis(t.RevokedAt)})
	if mongo.IsDuplicateKeyError(err) {
		return store.ConflictError("token %s exists", t.ID)
	}
	return wrap("insert token", err)
}

func (s *Store) oneToken(ctx context.Context, f bson.D, what string) (*rota.Token, error) {
	var t tokenDoc
	err := s.tokens.FindOne(ctx, f).Decode(&t)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, store.NotFoundError("token", what)
	}
	if err != nil {
		return nil, wrap("read token", err)
	}
	return t.token(), nil
}

// TokenGetByHash implements store.Store.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*rota.Token, error) {
	return s.oneToken(ctx, bson.D{{Key: "hash", Value: hash}}, "(by hash)")
}

// TokenList implements store.Store.
func (s *Store) TokenList(ctx context.Context) ([]rota.Token, error) {
	docs, err := findAll[tokenDoc](ctx, s.tokens, bson.D{}, "tokens", options.Find().SetSort(bson.D{{Key: "created", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := make([]rota.Token, len(docs))
	for i := range docs {
		out[i] = *docs[i].token()
	}
	return out, nil
}

// TokenRevoke implements store.Store.
func (s *Store) TokenRevoke(ctx context.Context, p store.TokenRevokeParams) (*rota.Token, error) {
	if _, err := s.tokens.UpdateOne(ctx, bson.D{{Key: "_id", Value: p.ID}, {Key: "revoked", Value: int64(0)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "revoked", Value: store.Millis(p.Now)}}}}); err != nil {
		return nil, wrap("revoke token", err)
	}
	return s.oneToken(ctx, id(p.ID), p.ID)
}

// RunKinds implements store.Store.
func (s *Store) RunKinds(ctx context.Context, runIDs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(runIDs) == 0 {
		return out, nil
	}
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "rids", Value: bson.D{{Key: "$in", Value: runIDs}}}}, "run kinds",
		options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}, {Key: "rids", Value: 1}}))
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, r := range runIDs {
		want[r] = true
	}
	for _, t := range docs {
		for _, r := range t.RIDs {
			if want[r] {
				out[r] = t.Kind
			}
		}
	}
	return out, nil
}

type auditDoc struct {
	ID     string `bson:"_id"`
	At     int64  `bson:"at"`
	Actor  string `bson:"actor"`
	Role   string `bson:"role"`
	Action string `bson:"action"`
	Target string `bson:"target"`
	ReqID  string `bson:"req"`
	Remote string `bson:"remote"`
	Before string `bson:"before,omitempty"`
	After  string `bson:"after,omitempty"`
}

// AuditAppend implements store.Store.
func (s *Store) AuditAppend(ctx context.Context, r rota.AuditRecord) error {
	_, err := s.audit.InsertOne(ctx, auditDoc{ID: r.ID, At: store.Millis(r.At), Actor: r.Actor, Role: string(r.Role),
		Action: r.Action, Target: r.Target, ReqID: r.RequestID, Remote: r.RemoteAddr, Before: string(r.Before), After: string(r.After)})
	return wrap("append audit record", err)
}

// AuditList implements store.Store.
func (s *Store) AuditList(ctx context.Context, p store.AuditListParams) (store.AuditListResult, error) {
	f := bson.D{}
	for _, c := range []struct{ k, v string }{{"actor", p.Actor}, {"action", p.Action}, {"target", p.Target}} {
		if c.v != "" {
			f = append(f, bson.E{Key: c.k, Value: c.v})
		}
	}
	if !p.Since.IsZero() {
		f = append(f, bson.E{Key: "at", Value: bson.D{{Key: "$gte", Value: store.Millis(p.Since)}}})
	}
	if p.Cursor != "" {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: p.Cursor}}})
	}
	limit := max(p.Limit, 1)
	docs, err := findAll[auditDoc](ctx, s.audit, f, "audit", options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(limit+1)))
	if err != nil {
		return store.AuditListResult{}, err
	}
	recs := make([]rota.AuditRecord, len(docs))
	for i, d := range docs {
		recs[i] = rota.AuditRecord{ID: d.ID, At: store.FromMillis(d.At), Actor: d.Actor, Role: rota.Role(d.Role), Action: d.Action,
			Target: d.Target, RequestID: d.ReqID, RemoteAddr: d.Remote}
		if d.Before != "" {
			recs[i].Before = json.RawMessage(d.Before)
		}
		if d.After != "" {
			recs[i].After = json.RawMessage(d.After)
		}
	}
	return store.AuditListPage(recs, limit), nil
}

// AuditCleanup implements store.Store.
func (s *Store) AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteOldest(ctx, s.audit, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: store.Millis(before)}}}}, "at", limit)
}

// deleteOldest deletes up to limit documents of c matching f, by field
// by ascending.
func (s *Store) deleteOldest(ctx context.Context, c *mongo.Collection, f bson.D, by string, limit int) (int, error) {
	docs, err := findAll[struct {
		ID any `bson:"_id"`
	}](ctx, c, f, "old "+c.Name(), options.Find().SetSort(bson.D{{Key: by, Value: 1}}).SetLimit(int64(max(limit, 1))).
		SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil || len(docs) == 0 {
		return 0, err
	}
	ids := make(bson.A, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	res, err := c.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return 0, wrap("delete old "+c.Name(), err)
	}
	return int(res.DeletedCount), nil
}
