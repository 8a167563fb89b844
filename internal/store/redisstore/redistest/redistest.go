// Package redistest opens Redis stores for tests: each on a key prefix of
// its own in the Redis of $ROTA_TEST_REDIS (default the machine's,
// redis://127.0.0.1:6379/0), deleted at the end. A missing server fails
// the test; nothing is skipped.
package redistest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store/redisstore"
)

// URL is the Redis the tests use.
func URL() string {
	if u := os.Getenv("ROTA_TEST_REDIS"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

var seq atomic.Int64

// Prefix returns a new key prefix, and registers the deletion of its keys
// on tb.
func Prefix(tb testing.TB) string {
	prefix := fmt.Sprintf("rotatest:%d:%d:%d:", os.Getpid(), time.Now().UnixNano(), seq.Add(1))
	tb.Cleanup(func() { Drop(tb, URL(), prefix) })
	return prefix
}

// Open opens a store on a prefix of its own, closed and deleted at the
// end of tb.
func Open(tb testing.TB) *redisstore.Store {
	tb.Helper()
	u := URL() + "?prefix=" + Prefix(tb)
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: u, NodeID: "test"})
	if err != nil {
		tb.Fatalf("Redis (set ROTA_TEST_REDIS to a reachable one): %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Drop deletes every key of prefix in the Redis at url.
func Drop(tb testing.TB, url, prefix string) {
	if err := redisstore.DropPrefix(context.Background(), url, prefix); err != nil {
		tb.Error(err)
	}
}
