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

func TestCAS(t *testing.T) {
	u := DB(t)
	c, err := mongo.Connect(options.Client().ApplyURI(u))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("x").Collection("cas")
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		coll.InsertOne(ctx, bson.M{"_id": round, "v": 0})
		var wins, upd, fam atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := coll.ReplaceOne(ctx, bson.M{"_id": round, "v": 0}, bson.M{"_id": round, "v": 1, "g": g})
				if err == nil && r.MatchedCount == 1 {
					wins.Add(1)
				}
				r2, err := coll.UpdateOne(ctx, bson.M{"_id": round, "v": 1}, bson.M{"$set": bson.M{"v": 2}})
				if err == nil && r2.MatchedCount == 1 {
					upd.Add(1)
				}
				err = coll.FindOneAndUpdate(ctx, bson.M{"_id": round, "v": 2}, bson.M{"$set": bson.M{"v": 3}}).Err()
				if err == nil {
					fam.Add(1)
				}
			}()
		}
		wg.Wait()
		t.Logf("round %d: replace wins %d, update wins %d, findAndModify wins %d", round, wins.Load(), upd.Load(), fam.Load())
	}
}

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
		t.Logf("round %d: insert wins %d, delete wins %d", round, wins.Load(), dels.Load())
	}
}
