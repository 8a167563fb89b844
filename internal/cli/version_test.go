package cli

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	b := &bundle{ctx: t.Context(), env: map[string]string{}}
	info := buildinfo.Get()

	out := b.ok(t, "version")
	if want := info.String() + "\n"; out != want {
		t.Errorf("rota version = %q, want %q", out, want)
	}
	if !strings.HasPrefix(out, "rota ") || !strings.Contains(out, info.GoVersion) {
		t.Errorf("rota version = %q: want the version and %s", out, info.GoVersion)
	}

	if got := b.ok(t, "--version"); got != out {
		t.Errorf("rota --version = %q, want %q", got, out)
	}

	var got map[string]string
	if err := json.Unmarshal([]byte(b.ok(t, "version", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": info.Version, "commit": info.Commit, "build_date": info.BuildDate, "go_version": info.GoVersion}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rota version -o json (-want +got):\n%s", d)
	}

	if e := b.wantExit(t, ExitUsage, "version", "-o", "yaml"); !strings.Contains(e, "--output") {
		t.Errorf("stderr = %q, want it to name --output", e)
	}
}

func TestVersionMatchesServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var api map[string]string
	if err := b.client.Do(b.ctx, "GET", "/api/version", nil, &api); err != nil {
		t.Fatal(err)
	}
	var cli map[string]string
	if err := json.Unmarshal([]byte(b.ok(t, "version", "-o", "json")), &cli); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(api, cli); d != "" {
		t.Errorf("GET /api/version vs rota version -o json (-api +cli):\n%s", d)
	}
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if out := b.ok(t, "healthcheck"); out != "ok\n" {
		t.Errorf("healthcheck: stdout %q, want ok", out)
	}
	if out := b.ok(t, "healthcheck", "--ready", "--server", b.url, "--timeout", "2s"); out != "ok\n" {
		t.Errorf("healthcheck --ready: stdout %q, want ok", out)
	}

	// Nobody listens: exit 1, naming the server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	if e := b.wantExit(t, ExitError, "healthcheck", "--server", dead); !strings.Contains(e, dead) {
		t.Errorf("stderr = %q, want it to name %s", e, dead)
	}
	// Something that is not Rota answers 404: still exit 1, not 3.
	if e := b.wantExit(t, ExitError, "healthcheck", "--server", b.url+"/elsewhere"); !strings.Contains(e, "healthz") {
		t.Errorf("stderr = %q, want it to name healthz", e)
	}
	b.wantExit(t, ExitUsage, "healthcheck", "--timeout", "0s")
}
