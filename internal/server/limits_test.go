package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends req as is on a new connection and reads the answer.
func rawRequest(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestHeaderLimitRefusedWithEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodeID: "hdr",
		Limits: Limits{MaxHeaderBytes: 8 << 10}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(ctx) })
	if s.http.IdleTimeout != DefaultIdleTimeout || s.http.ReadHeaderTimeout != DefaultReadHeaderTimeout {
		t.Fatalf("http.Server timeouts: idle %v, read header %v", s.http.IdleTimeout, s.http.ReadHeaderTimeout)
	}
	for _, size := range []int{9 << 10, 100 << 10} {
		req := fmt.Sprintf("GET /api/healthz HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n", s.Addr(), strings.Repeat("a", size))
		resp, body := rawRequest(t, s.Addr(), req)
		var env struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || json.Unmarshal(body, &env) != nil || env.Code != 41300 {
			t.Fatalf("%d bytes of header: %d %q, want 431 with a too_large envelope", size, resp.StatusCode, body)
		}
	}
	// Under the limit: served.
	req := fmt.Sprintf("GET /api/healthz HTTP/1.1\r\nHost: %s\r\nX-Small: %s\r\n\r\n", s.Addr(), strings.Repeat("a", 4<<10))
	if resp, body := rawRequest(t, s.Addr(), req); resp.StatusCode != http.StatusOK {
		t.Fatalf("4 KiB of header: %d %q, want 200", resp.StatusCode, body)
	}
}
