package netguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/netguard"
)

// fakeResolver resolves names from a map; anything else is not found.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func newGuard(t *testing.T, cfg netguard.Config) *netguard.Guard {
	t.Helper()
	g, err := netguard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Every refused range, with an address at its edges and its IPv4-mapped
// and NAT64 forms, is refused with its reason; public addresses pass.
func TestCheckAddrMatrix(t *testing.T) {
	t.Parallel()
	g := newGuard(t, netguard.Config{})
	for _, tc := range []struct{ addr, reason string }{
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fd00:ec2::254", "cloud metadata"},
		{"fc00::1", "unique-local"},
		{"fdff:ffff::1", "unique-local"},
		{"fec0::1", "site-local"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"::ffff:100.64.0.1", "CGNAT"},
		{"::ffff:224.0.0.1", "multicast"},
		{"::ffff:255.255.255.255", "broadcast"},
		{"64:ff9b::127.0.0.1", "loopback"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"},
	} {
		err := g.CheckAddr(netip.MustParseAddr(tc.addr))
		var re *netguard.RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.reason) || !strings.Contains(err.Error(), "--target-allow") {
			t.Errorf("CheckAddr(%s) = %v, want refused as %s", tc.addr, err, tc.reason)
		}
	}
	for _, a := range []string{"8.8.8.8", "172.32.0.1", "172.15.255.255", "100.128.0.1", "100.63.255.255", "192.169.0.1",
		"169.253.255.255", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		if err := g.CheckAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want allowed", a, err)
		}
	}
}

func TestAllowList(t *testing.T) {
	t.Parallel()
	g := newGuard(t, netguard.Config{Allow: netguard.SplitList(" 10.1.0.0/16, 127.0.0.2,[::1]:8443,,127.0.0.3:8080 , hooks.internal, api.corp:9000,::ffff:192.168.0.0/112")})
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"10.1.2.3", true}, {"10.2.0.1", false}, {"127.0.0.2", true}, {"::ffff:127.0.0.2", true}, {"127.0.0.1", false},
		{"::1", false},       // allowed on port 8443 only
		{"127.0.0.3", false}, // allowed on port 8080 only
		{"192.168.5.5", true},
	} {
		if err := g.CheckAddr(netip.MustParseAddr(tc.addr)); (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%s) = %v, want allowed %v", tc.addr, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://[::1]:8443/x", true}, {"http://[::1]:8080/x", false},
		{"http://127.0.0.3:8080/", true}, {"http://127.0.0.3/", false},
		{"http://hooks.internal/", true}, {"https://HOOKS.internal.:1/", true},
		{"http://api.corp:9000/", true}, {"http://api.corp/", true}, // a name passes CheckURL anyway
	} {
		if err := g.CheckURL(tc.url); (err == nil) != tc.ok {
			t.Errorf("CheckURL(%s) = %v, want allowed %v", tc.url, err, tc.ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "not a host!", "host:0", "host:99999", "127.0.0.1:0", "1.2.3.4/x"} {
		if _, err := netguard.New(netguard.Config{Allow: []string{bad}}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("New(Allow %q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	g := newGuard(t, netguard.Config{})
	for _, tc := range []struct {
		url, want string // want "" means allowed
	}{
		{"https://hooks.example.com/run", ""},
		{"http://8.8.8.8:8080/", ""},
		{"http://internal.example/", ""}, // names are checked at dial time
		{"http://localhost:8080/", "loopback"},
		{"http://LOCALHOST./", "loopback"},
		{"http://app.localhost/", "loopback"},
		{"http://127.0.0.1/", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://[::]:80/", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"http://10.0.0.5/", "private"},
		{"http://[fe80::1%25eth0]/", "link-local"},
		{"ftp://example.com/", "scheme"},
		{"file:///etc/passwd", "scheme"},
		{"gopher://example.com/", "scheme"},
	} {
		err := g.CheckURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckURL(%s) = %v, want allowed", tc.url, err)
		case tc.want != "" && (!netguard.IsRefused(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckURL(%s) = %v, want refused (%s)", tc.url, err, tc.want)
		}
	}
	lh := newGuard(t, netguard.Config{Allow: []string{"127.0.0.1"}})
	if err := lh.CheckURL("http://localhost:9/"); err != nil {
		t.Errorf("localhost with 127.0.0.1 allowed: %v", err)
	}
}

// Dials of refused addresses, literal or resolved, never reach the
// dialer; a name that resolves to several addresses is refused when any
// one of them is.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	names := fakeResolver{"public.test": {"93.184.216.34"}, "mixed.test": {"93.184.216.34", "10.0.0.1"}}
	refused := []string{"127.0.0.1", "::1", "0.0.0.0", "::", "10.1.1.1", "172.20.0.1", "192.168.0.1", "169.254.169.254",
		"fe80::1", "fd12::1", "100.64.1.1", "224.0.0.251", "ff02::fb", "255.255.255.255", "::ffff:127.0.0.1", "::ffff:169.254.169.254"}
	for i, a := range refused {
		names[fmt.Sprintf("r%d.test", i)] = []string{a}
	}
	g := newGuard(t, netguard.Config{Resolver: names, Dial: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("test dialer: no network")
	}})
	ctx := context.Background()
	for i, a := range refused {
		for _, addr := range []string{net.JoinHostPort(a, "80"), fmt.Sprintf("r%d.test:80", i)} {
			if _, err := g.DialContext(ctx, "tcp", addr); !netguard.IsRefused(err) {
				t.Errorf("dial %s (%s): %v, want refused", addr, a, err)
			}
		}
	}
	if _, err := g.DialContext(ctx, "tcp", "mixed.test:443"); !netguard.IsRefused(err) || !strings.Contains(err.Error(), "mixed.test (10.0.0.1)") {
		t.Errorf("mixed.test: %v, want refused naming 10.0.0.1", err)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("the dialer was called %d times for refused addresses", n)
	}
	if _, err := g.DialContext(ctx, "tcp", "public.test:443"); netguard.IsRefused(err) || dials.Load() != 1 {
		t.Errorf("public.test: %v after %d dials, want one dial", err, dials.Load())
	}
	if _, err := g.DialContext(ctx, "tcp", "nowhere.test:443"); err == nil || netguard.IsRefused(err) {
		t.Errorf("unresolvable name: %v", err)
	}
}

// server is an httptest server on a loopback address that counts the
// requests it receives.
type server struct {
	*httptest.Server
	hits atomic.Int32
	last atomic.Pointer[http.Request]
}

func serveOn(t *testing.T, ip string, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.last.Store(r.Clone(context.Background()))
		if h != nil {
			h(w, r)
		}
	}))
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func port(t *testing.T, s *server) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	for k := range hdr {
		names = append(names, k)
	}
	req, err := http.NewRequestWithContext(netguard.WithSecretHeaders(ctx, names), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// The SSRF matrix over real connections: a refused server (127.0.0.1)
// receives nothing whether it is named by address, by a name resolving to
// it, or by a redirect from an allowed host (127.0.0.2).
func TestClientNeverReachesRefusedServer(t *testing.T) {
	t.Parallel()
	victim := serveOn(t, "127.0.0.1", nil)
	vport := port(t, victim)
	allowed := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
		}
	})
	names := fakeResolver{"hook.test": {"127.0.0.2"}, "evil.test": {"127.0.0.1"}, "rebind.test": {"127.0.0.2", "127.0.0.1"}}
	g := newGuard(t, netguard.Config{Allow: []string{"127.0.0.2"}, Resolver: names})
	c := g.Client()
	aport := port(t, allowed)

	if resp, err := get(t, c, allowed.URL+"/ok", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed server: %v", err)
	}
	if resp, err := get(t, c, "http://hook.test:"+aport+"/ok", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed name: %v", err)
	}
	for _, u := range []string{
		victim.URL + "/direct",
		"http://localhost:" + vport + "/localhost",
		"http://[::ffff:127.0.0.1]:" + vport + "/mapped",
		"http://evil.test:" + vport + "/name",
		"http://rebind.test:" + vport + "/rebind",
		allowed.URL + "/?to=" + url.QueryEscape(victim.URL+"/redirect"),
		allowed.URL + "/?to=" + url.QueryEscape("http://evil.test:"+vport+"/redirect-name"),
		"http://hook.test:" + aport + "/?to=" + url.QueryEscape("http://localhost:"+vport+"/redirect-localhost"),
	} {
		_, err := get(t, c, u, nil)
		if !netguard.IsRefused(err) || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("GET %s: %v, want refused naming 127.0.0.1 (loopback)", u, err)
		}
	}
	if n := victim.hits.Load(); n != 0 {
		t.Fatalf("the refused server received %d requests", n)
	}
	if _, err := get(t, c, allowed.URL+"/?to="+url.QueryEscape("ftp://example.com/"), nil); err == nil {
		t.Errorf("redirect to ftp: no error")
	}
}

// At most five redirects are followed.
func TestClientRedirectLimit(t *testing.T) {
	t.Parallel()
	var s *server
	s = serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("%s/?n=%d", s.URL, n-1), http.StatusFound)
		}
	})
	c := newGuard(t, netguard.Config{Allow: []string{"127.0.0.2"}}).Client()
	if resp, err := get(t, c, s.URL+"/?n=5", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("5 redirects: %v", err)
	}
	before := s.hits.Load()
	if _, err := get(t, c, s.URL+"/?n=9", nil); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Fatalf("9 redirects: %v", err)
	}
	if n := s.hits.Load() - before; n != 6 {
		t.Fatalf("%d requests for a chain of 9 redirects, want 6 (the first and 5 redirects)", n)
	}
}

// Authorization and the secret headers follow a redirect on the same host
// only.
func TestClientStripsSecretsAcrossHosts(t *testing.T) {
	t.Parallel()
	other := serveOn(t, "127.0.0.3", nil)
	var first *server
	first = serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, first.URL+"/end", http.StatusTemporaryRedirect)
		case "/other":
			http.Redirect(w, r, other.URL+"/end", http.StatusTemporaryRedirect)
		}
	})
	g := newGuard(t, netguard.Config{Allow: []string{"127.0.0.2", "127.0.0.3"}})
	c := g.Client()
	hdr := map[string]string{"Authorization": "Bearer s3cret", "X-Api-Key": "k3y", "Cookie": "c=1", "X-Plain": "p"}
	if _, err := get(t, c, first.URL+"/same", hdr); err != nil {
		t.Fatal(err)
	}
	if r := first.last.Load(); r.URL.Path != "/end" || r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Api-Key") != "k3y" {
		t.Errorf("same host: %s with %v, want the secrets kept", r.URL.Path, r.Header)
	}
	if _, err := get(t, c, first.URL+"/other", hdr); err != nil {
		t.Fatal(err)
	}
	r := other.last.Load()
	if r == nil {
		t.Fatal("the other host received nothing")
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "Cookie", "X-Plain"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("other host received %s: %q", h, v)
		}
	}
}
