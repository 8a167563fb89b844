package mongotest

import (
	"context"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestStart(t *testing.T) {
	u := DB(t)
	c, err := mongo.Connect(options.Client().ApplyURI(u))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("x").Collection("y")
	if _, err := coll.InsertOne(context.Background(), bson.M{"_id": "a", "n": 1}); err != nil {
		t.Fatal(err)
	}
	var out bson.M
	if err := coll.FindOneAndUpdate(context.Background(), bson.M{"_id": "a"}, bson.M{"$inc": bson.M{"n": 1}}).Decode(&out); err != nil {
		t.Fatal(err)
	}
	t.Log(u, out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}
