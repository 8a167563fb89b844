// Package etcdtest runs a single-member etcd inside a test process
// (go.etcd.io/etcd/server/v3/embed) on free loopback ports, for the tests
// of the etcd registry and of the cluster on it.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start runs an etcd member in a temp dir until the test ends and returns
// its client endpoint (host:port).
func Start(tb testing.TB) string {
	tb.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "rota-test"
	cfg.Dir = tb.TempDir()
	cfg.LogLevel = "error"
	// Quiet: even at "error" the member logs its own listeners closing at
	// Close; a failure to start is still reported by StartEtcd.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := freeURL(tb), freeURL(tb)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		tb.Fatalf("start embedded etcd: %v", err)
	}
	tb.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		tb.Fatal("embedded etcd not ready after 30 s")
	}
	return client.Host
}

// freeURL is http://127.0.0.1:PORT on a port free at the time of asking.
func freeURL(tb testing.TB) url.URL {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return url.URL{Scheme: "http", Host: addr}
}

// URL is the registry URL of endpoint with prefix (empty: the default).
func URL(endpoint, prefix string) string {
	if prefix == "" {
		return "etcd://" + endpoint
	}
	return fmt.Sprintf("etcd://%s/%s", endpoint, prefix)
}
