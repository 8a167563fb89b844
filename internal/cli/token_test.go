package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/server"
)

func TestTokenCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := server.New(ctx, server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Relaxed: true,
		AuthToken: "boot", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	url := "http://" + srv.Addr()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	admin := &bundle{url: url, ctx: tctx, env: map[string]string{"ROTA_SERVER": url, "ROTA_TOKEN": "boot"}}

	out := admin.ok(t, "token", "create", "--name", "ci", "--role", "submitter", "--kind", "email")
	secret := regexp.MustCompile(`rota_[A-Za-z0-9_-]{43}`).FindString(out)
	id := idRE.FindString(out)
	if secret == "" || id == "" || !strings.Contains(out, "shown only now") {
		t.Fatalf("token create printed:\n%s", out)
	}
	list := admin.ok(t, "token", "list")
	if !strings.Contains(list, id) || !strings.Contains(list, "submitter") || !strings.Contains(list, "email") || strings.Contains(list, secret) {
		t.Fatalf("token list:\n%s", list)
	}
	ci := &bundle{url: url, ctx: tctx, env: map[string]string{"ROTA_SERVER": url, "ROTA_TOKEN": secret}}
	ci.ok(t, "task", "submit", "--kind", "email", "--payload", "{}")
	if msg := ci.wantExit(t, ExitError, "task", "submit", "--kind", "sms", "--payload", "{}"); !strings.Contains(msg, "may not use kind") {
		t.Fatalf("submit of another kind: %q", msg)
	}
	if msg := ci.wantExit(t, ExitError, "token", "list"); !strings.Contains(msg, "admin") {
		t.Fatalf("token list as submitter: %q", msg)
	}
	admin.wantExit(t, ExitUsage, "token", "create", "--name", "x", "--role", "root")
	admin.ok(t, "token", "revoke", id)
	ci.wantExit(t, ExitError, "task", "list")
	admin.wantExit(t, ExitNotFound, "token", "revoke", "0123456789abcdef0123456789abcdef")
	var tokens struct {
		Tokens []struct {
			RevokedAt int64 `json:"revoked_at"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(admin.ok(t, "token", "list", "-o", "json")), &tokens); err != nil || len(tokens.Tokens) != 1 || tokens.Tokens[0].RevokedAt == 0 {
		t.Fatalf("token list -o json: %+v %v", tokens, err)
	}
}

func TestServerRefusesAnOpenDoor(t *testing.T) {
	t.Parallel()
	b := &bundle{ctx: context.Background(), env: map[string]string{}}
	start := time.Now()
	r := b.run(t, "server", "--listen", "0.0.0.0:0", "--data", t.TempDir())
	if r.code == ExitOK || !strings.Contains(r.stderr, "--auth-token") || !strings.Contains(r.stderr, "--insecure-no-auth") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refused after %v", d)
	}
}

// TestServerRefusesAnOpenProfiler: --debug-listen serves pprof without
// authentication, so it binds loopback only.
func TestServerRefusesAnOpenProfiler(t *testing.T) {
	t.Parallel()
	b := &bundle{ctx: context.Background(), env: map[string]string{}}
	r := b.run(t, "server", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--debug-listen", "0.0.0.0:0")
	if r.code == ExitOK || !strings.Contains(r.stderr, "--debug-listen") || !strings.Contains(r.stderr, "loopback") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
