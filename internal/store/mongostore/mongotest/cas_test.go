package mongotest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestInsertUnique checks what mongostore's compare-and-set rests on when
// conditional updates are not atomic (FerretDB v1, see
// mongostore.replaceVersioned): of concurrent inserts of one _id exactly
// one succeeds, and of concurrent deletes exactly one counts.
func TestInsertUnique(t *testing.T) {
	u := DB(t)
	c, err := mongo.Connect(options.Client().ApplyURI(u))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("x").Collection("ins")
	ctx := context.Background()
	for round := 0; round < 10; round++ {
		var wins, dels atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := coll.InsertOne(ctx, bson.M{"_id": round, "g": g}); err == nil {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, err := coll.DeleteOne(ctx, bson.M{"_id": round}); err == nil && r.DeletedCount == 1 {
					dels.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || dels.Load() != 1 {
			t.Errorf("round %d: %d inserts and %d deletes of one _id won, want 1 and 1", round, wins.Load(), dels.Load())
		}
	}
}
