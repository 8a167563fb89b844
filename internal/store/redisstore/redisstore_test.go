package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/redisstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// testURL is the Redis the tests use: $ROTA_TEST_REDIS, else the
// machine's. A missing server fails the tests (no skip).
func testURL() string {
	if u := os.Getenv("ROTA_TEST_REDIS"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

var seq atomic.Int64

// openTemp opens a store on a key prefix of its own, deleted at cleanup.
func openTemp(tb testing.TB) *redisstore.Store {
	tb.Helper()
	prefix := fmt.Sprintf("rotatest:%d:%d:%d:", os.Getpid(), time.Now().UnixNano(), seq.Add(1))
	u := testURL() + "?prefix=" + prefix
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: u})
	if err != nil {
		tb.Fatalf("open %s: %v", u, err)
	}
	tb.Cleanup(func() {
		s.Close()
		dropPrefix(tb, prefix)
	})
	return s
}

// dropPrefix deletes every key of prefix.
func dropPrefix(tb testing.TB, prefix string) {
	opts, _, err := redisstore.ParseURL(testURL())
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		c.Del(ctx, keys[:n]...)
		keys = keys[n:]
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) store.Store { return openTemp(tb) })
}
