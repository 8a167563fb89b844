package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowBody is a request body of n bytes (a submit whose payload pads it)
// that sends its first half at once and the rest when release is closed.
func slowBody(n int, release <-chan struct{}) io.Reader {
	head := `{"kind":"big","task":{"pad":"`
	tail := `"}}`
	body := head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	pr, pw := io.Pipe()
	go func() {
		half := len(body) / 2
		if _, err := io.WriteString(pw, body[:half]); err != nil {
			return
		}
		<-release
		_, _ = io.WriteString(pw, body[half:])
		pw.Close()
	}()
	return pr
}

// post sends a body of n bytes with its Content-Length and returns the
// status, the Retry-After header and the envelope code.
func post(t *testing.T, url string, n int, body io.Reader) (status int, retryAfter string, code int) {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/api/tasks", body)
	if err != nil {
		t.Error(err)
		return 0, "", 0
	}
	req.ContentLength = int64(n)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", 0
	}
	defer resp.Body.Close()
	var env struct {
		Code int `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Errorf("POST: %d, not an envelope: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), env.Code
}

// TestInflightBodiesCapped sends several large bodies at once against a
// small cap: those that fit are read and answered 200, the others wait
// briefly and get 503 unavailable with Retry-After; once the first bodies
// are done, room returns.
func TestInflightBodiesCapped(t *testing.T) {
	t.Parallel()
	const size = 300 << 10
	e := setup(t, func(o *setupOptions) { o.maxInflight = 1 << 20; o.inflightWait = 300 * time.Millisecond })
	release := make(chan struct{})
	type result struct {
		status int
		retry  string
		code   int
	}
	results := make([]result, 6)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			s, ra, c := post(t, e.url, size, slowBody(size, release))
			results[i] = result{s, ra, c}
		})
	}
	// Let every request reach the cap, and the waiting ones time out.
	time.Sleep(time.Second)
	close(release)
	wg.Wait()
	var ok, busy int
	for i, r := range results {
		switch {
		case r.status == http.StatusOK:
			ok++
		case r.status == http.StatusServiceUnavailable && r.code == 50300 && r.retry != "":
			busy++
		default:
			t.Errorf("request %d: %+v, want 200, or 503 unavailable with Retry-After", i, r)
		}
	}
	if ok != 3 || busy != 3 {
		t.Fatalf("%d answered 200 and %d 503, want 3 and 3 (a 1 MiB cap holds three 300 KiB bodies)", ok, busy)
	}
	// The cap is free again.
	done := make(chan struct{})
	close(done)
	if s, _, _ := post(t, e.url, size, slowBody(size, done)); s != http.StatusOK {
		t.Fatalf("after the burst: %d, want 200", s)
	}
}

// TestInflightChunkedBodyHeldAtItsSize checks that a body without a
// Content-Length reserves the route's limit while it is read and only its
// real size afterwards.
func TestInflightChunkedBodyHeldAtItsSize(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.maxInflight = 4 << 20 })
	for i := range 20 {
		body := fmt.Sprintf(`{"kind":"chunked","task":{"n":%d}}`, i)
		req, _ := http.NewRequest("POST", e.url+"/api/tasks", io.MultiReader(strings.NewReader(body)))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chunked submit %d: %d", i, resp.StatusCode)
		}
	}
	if !e.api.inflight.sem.TryAcquire(4 << 20) {
		t.Fatal("the in-flight cap is not whole again after the requests")
	}
}
