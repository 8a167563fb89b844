package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
)

const kindsYAML = `# kinds of the test
kinds:
  - name: email
    priority_factor: 5
    max_running: 10
  - name: report
    paused: true
    rate: 2.5
    retention_seconds: 3600
`

// writeFile writes body into a file named name in a temporary directory
// and returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServer starts a server for cfg (a fresh embedded store unless cfg
// says otherwise) and stops it when the test ends.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx := context.Background()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Relaxed = true
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		s.Stop(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s
}

// apiEnvelope is a response of the API.
type apiEnvelope struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// call sends a request with a JSON body (none when body is "") and
// returns the status and envelope.
func call(t *testing.T, s *Server, method, path, body string) (int, apiEnvelope) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+s.Addr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env apiEnvelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, env
}

// kindOf returns a kind's settings as GET /api/kinds/{kind} shows them.
func kindOf(t *testing.T, s *Server, name string) map[string]any {
	t.Helper()
	status, env := call(t, s, http.MethodGet, "/api/kinds/"+name, "")
	if status != http.StatusOK {
		t.Fatalf("GET kind %s: %d %s", name, status, env.Message)
	}
	var k map[string]any
	if err := json.Unmarshal(env.Data, &k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKindsFileAppliedAtStart(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"kinds.yaml", "kinds.json"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body := kindsYAML
			if name == "kinds.json" {
				body = `{"kinds": [{"name": "email", "priority_factor": 5, "max_running": 10},
					{"name": "report", "paused": true, "rate": 2.5, "retention_seconds": 3600}]}`
			}
			s := startServer(t, Config{KindsFile: writeFile(t, name, body)})
			email, report := kindOf(t, s, "email"), kindOf(t, s, "report")
			for _, c := range []struct {
				kind  map[string]any
				field string
				want  any
			}{
				{email, "priority_factor", 5.0}, {email, "max_running", 10.0}, {email, "paused", false},
				{report, "paused", true}, {report, "rate", 2.5}, {report, "retention_seconds", 3600.0},
				{report, "priority_factor", float64(rota.DefaultPriorityFactor)},
			} {
				if got := c.kind[c.field]; got != c.want {
					t.Errorf("%s.%s = %v, want %v", c.kind["name"], c.field, got, c.want)
				}
			}
		})
	}
}

func TestKindsFileReappliedIdempotently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	file := writeFile(t, "kinds.yaml", kindsYAML)
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: dir, Relaxed: true, KindsFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// New applied the file; applying it again changes nothing.
	changed, err := s.applyKinds(ctx)
	if err != nil || len(changed) != 0 {
		t.Errorf("second apply changed %v, %v; want nothing", changed, err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// An operator changes a declared setting and one the file leaves out.
	if status, env := call(t, s, http.MethodPut, "/api/kinds/email", `{"max_running": 99, "rate": 7}`); status != http.StatusOK {
		t.Fatalf("PUT: %d %s", status, env.Message)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// The next start restores the declared one and keeps the other.
	s2 := startServer(t, Config{DataDir: dir, KindsFile: file})
	email := kindOf(t, s2, "email")
	if email["max_running"] != 10.0 || email["rate"] != 7.0 || email["priority_factor"] != 5.0 {
		t.Errorf("email after restart = %v, want max_running 10 (declared), rate 7 (kept), priority_factor 5", email)
	}
	if changed, err := s2.applyKinds(ctx); err != nil || len(changed) != 0 {
		t.Errorf("apply after restart changed %v, %v; want nothing", changed, err)
	}
}

func TestStrictKindsRefuseUndeclaredSubmits(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{KindsFile: writeFile(t, "kinds.yaml", kindsYAML), StrictKinds: true})
	field := func(env apiEnvelope) string {
		var d struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal(env.Data, &d)
		return d.Field
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"declared", "/api/tasks", `{"kind":"email","task":{}}`, http.StatusOK, ""},
		{"undeclared", "/api/tasks", `{"kind":"sms","task":{}}`, http.StatusBadRequest, "kind"},
		{"batch declared", "/api/tasks/batch", `{"tasks":[{"kind":"email","task":1},{"kind":"report","task":2}]}`, http.StatusOK, ""},
		{"batch undeclared", "/api/tasks/batch", `{"tasks":[{"kind":"email","task":1},{"kind":"sms","task":2}]}`, http.StatusBadRequest, "tasks[1].kind"},
	} {
		status, env := call(t, s, http.MethodPost, c.path, c.body)
		if status != c.status || field(env) != c.field {
			t.Errorf("%s: %d %q field %q, want %d field %q", c.name, status, env.Message, field(env), c.status, c.field)
		}
		if c.status == http.StatusBadRequest && (env.Code != rota.CodeInvalid.Number() || !strings.Contains(env.Message, `"sms"`)) {
			t.Errorf("%s: code %d %q, want %d naming the kind", c.name, env.Code, env.Message, rota.CodeInvalid.Number())
		}
	}
	// Nothing of the refused batch was stored.
	status, env := call(t, s, http.MethodGet, "/api/tasks?kind=email", "")
	var list struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(env.Data, &list); status != http.StatusOK || err != nil || len(list.Tasks) != 2 {
		t.Errorf("email tasks: %d, %d stored (%v), want 2", status, len(list.Tasks), err)
	}

	// Without --strict-kinds, other kinds are accepted.
	lax := startServer(t, Config{KindsFile: writeFile(t, "kinds.yaml", kindsYAML)})
	if status, env := call(t, lax, http.MethodPost, "/api/tasks", `{"kind":"sms","task":{}}`); status != http.StatusOK {
		t.Errorf("not strict: %d %s", status, env.Message)
	}
}

func TestBadKindsFileFailsTheStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file, body string
		want             []string
	}{
		{"missing", "", "", []string{"no-such.json", "no such file"}},
		{"not JSON", "k.json", `{"kinds": [`, []string{"k.json", `want {"kinds"`}},
		{"not YAML", "k.yaml", "kinds:\n  - name: [a\n", []string{"k.yaml", "not valid YAML"}},
		{"empty", "k.json", `{"kinds": []}`, []string{"k.json", "declare at least one kind"}},
		{"unknown top field", "k.json", `{"kinds": [{"name":"a"}], "strict": true}`, []string{"k.json", `unknown field "strict"`}},
		{"unknown field", "k.yaml", "kinds:\n  - name: email\n  - name: sms\n    max_runing: 3\n", []string{"k.yaml", `kinds[1] "sms"`, `unknown field "max_runing"`}},
		{"field case", "k.json", `{"kinds": [{"name":"a", "Rate": 1}]}`, []string{`kinds[0] "a"`, `unknown field "Rate"`}},
		{"bad name", "k.json", `{"kinds": [{"name":"a b"}]}`, []string{`kinds[0] "a b"`, `name "a b"`}},
		{"no name", "k.json", `{"kinds": [{"rate": 1}]}`, []string{`kinds[0]:`, `name ""`}},
		{"bad range", "k.yaml", "kinds:\n  - name: email\n    priority_factor: 0\n", []string{"k.yaml", `kinds[0] "email"`, "priority_factor"}},
		{"bad type", "k.json", `{"kinds": [{"name":"a", "max_running": "ten"}]}`, []string{`kinds[0] "a"`, "max_running"}},
		{"not an object", "k.json", `{"kinds": ["email"]}`, []string{`kinds[0]`, "want an object"}},
		{"duplicate", "k.json", `{"kinds": [{"name":"a"}, {"name":"b"}, {"name":"a"}]}`, []string{`kinds[2] "a"`, "first at kinds[0]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "no-such.json")
			if c.file != "" {
				path = writeFile(t, c.file, c.body)
			}
			_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), KindsFile: path, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				t.Fatal("New accepted the file")
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Run("strict without a file", func(t *testing.T) {
		t.Parallel()
		_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), StrictKinds: true, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "--kinds-file") {
			t.Errorf("err = %v, want one asking for --kinds-file", err)
		}
	})
}

func TestParseKindsYAMLEqualsJSON(t *testing.T) {
	t.Parallel()
	fromYAML, err := parseKinds([]byte(kindsYAML), true)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(map[string]any{"kinds": fromYAML}); err != nil {
		t.Fatal(err)
	}
	fromJSON, err := parseKinds(buf.Bytes(), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromYAML, fromJSON); diff != "" {
		t.Errorf("(-yaml +json):\n%s", diff)
	}
	if len(fromYAML) != 2 || fromYAML[1].Name != "report" || fromYAML[1].Rate == nil || *fromYAML[1].Rate != 2.5 || fromYAML[0].Paused != nil {
		t.Errorf("parsed %+v", fromYAML)
	}
}

// TestKindsFileOnTwoNodes starts two nodes on one PostgreSQL schema with
// the same kinds file: the second finds the kinds applied and changes
// nothing.
func TestKindsFileOnTwoNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := os.Getenv("ROTA_TEST_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "kinds_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	file := writeFile(t, "kinds.yaml", kindsYAML)
	a := startServer(t, Config{Store: url, PGSchema: schema, NodeID: "a", KindsFile: file, StrictKinds: true})
	b2 := startServer(t, Config{Store: url, PGSchema: schema, NodeID: "b", KindsFile: file, StrictKinds: true})
	for _, s := range []*Server{a, b2} {
		if changed, err := s.applyKinds(ctx); err != nil || len(changed) != 0 {
			t.Errorf("node %s: apply changed %v, %v; want nothing", s.NodeID(), changed, err)
		}
		if k := kindOf(t, s, "email"); k["max_running"] != 10.0 || k["priority_factor"] != 5.0 {
			t.Errorf("node %s: email = %v", s.NodeID(), k)
		}
		if status, _ := call(t, s, http.MethodPost, "/api/tasks", `{"kind":"sms","task":{}}`); status != http.StatusBadRequest {
			t.Errorf("node %s: undeclared submit %d, want 400", s.NodeID(), status)
		}
	}
}
