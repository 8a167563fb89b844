package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	oapvalidator "github.com/pb33f/libopenapi-validator"

	"github.com/rotahq/rota/docs"
)

// TestOpenAPIOperationsServed checks docs/openapi.json against a running
// server: every operation is routed (not answered "no route", not by the
// web UI), and the routes the server adds to the API (the event stream,
// the throughput series, the metrics) answer as described.
// internal/httpapi holds the router's routes against the description in
// both directions.
func TestOpenAPIOperationsServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	base := "http://" + s.Addr()

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{id}", "0123456789abcdef0123456789abcdef", "{run_id}", "0123456789abcdef0123456789abcdef",
		"{token_id}", "0123456789abcdef0123456789abcdef", "{kind}", "k")
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch":
			default:
				continue
			}
			if path == "/api/events" {
				continue // a stream: checked below
			}
			m := strings.ToUpper(method)
			req, err := http.NewRequest(m, base+fill.Replace(path), strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				Message string `json:"message"`
			}
			_ = json.NewDecoder(res.Body).Decode(&env)
			res.Body.Close()
			ct := res.Header.Get("Content-Type")
			if strings.HasPrefix(ct, "text/html") || res.StatusCode == http.StatusMethodNotAllowed ||
				(res.StatusCode == http.StatusNotFound && strings.HasPrefix(env.Message, "no route")) {
				t.Errorf("%s %s is described but not served: %d %s %q", m, path, res.StatusCode, ct, env.Message)
			}
		}
	}

	oas, err := libopenapi.NewDocument(docs.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := oapvalidator.NewValidator(oas)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, path := range []string{"/api/stats/throughput", "/api/stats/throughput?kinds=a,b", "/metrics",
		"/api/stats/throughput?kinds=no%20way", "/api/events?color=red", "/api/openapi.json"} {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ok, errs := v.ValidateHttpResponse(req, res)
		res.Body.Close()
		if !ok {
			for _, e := range errs {
				t.Errorf("GET %s: %d: %s %s", path, res.StatusCode, e.Message, e.Reason)
			}
		}
	}
	// Headers over the limit: the 431 envelope the server answers before
	// any route.
	req, err := http.NewRequest("GET", base+"/api/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 100<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ok, verrs := v.ValidateHttpResponse(req, res)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("GET /api/healthz with 100 KiB of header: %d, want 431", res.StatusCode)
	}
	if !ok {
		for _, e := range verrs {
			t.Errorf("GET /api/healthz with 100 KiB of header: %d: %s %s", res.StatusCode, e.Message, e.Reason)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, "GET", base+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("GET /api/events: %d %q, want 200 text/event-stream", res.StatusCode, ct)
	}
}
