package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOpenDoorRefused(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		start := time.Now()
		_, err := New(context.Background(), Config{Listen: listen, DataDir: t.TempDir()})
		if !errors.Is(err, ErrOpenDoor) {
			t.Fatalf("listen %s without a credential: %v, want ErrOpenDoor", listen, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "--auth-token") || !strings.Contains(msg, "--insecure-no-auth") {
			t.Fatalf("message %q names neither flag", msg)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("refused after %v", d)
		}
	}
	if _, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: "c.pem"}); err == nil {
		t.Fatal("--tls-cert without --tls-key accepted")
	}
}

// syncBuf is a bytes.Buffer for a logger written concurrently.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestInsecureNoAuthWarnsAndChecksHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &syncBuf{}
	s, err := New(ctx, Config{Listen: "0.0.0.0:0", DataDir: t.TempDir(), InsecureNoAuth: true, Advertise: "rota.internal:8080",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "insecure-no-auth") {
		t.Fatalf("no warning at start: %s", logs)
	}
	_, port, _ := net.SplitHostPort(s.Addr())
	get := func(host string) int {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/api/tasks", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for host, want := range map[string]int{"127.0.0.1:" + port: 200, "localhost:" + port: 200, "rota.internal:8080": 200, "evil.example": 403} {
		if got := get(host); got != want {
			t.Errorf("Host %s: %d, want %d", host, got, want)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rota test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSAndRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	certFile, keyFile, pool := selfSigned(t)
	s, err := New(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), AuthToken: "boot", TLSCert: certFile, TLSKey: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	base := "https://" + s.Addr()
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// Certificates are verified: an unknown one is refused.
	if _, err := http.Get(base + "/api/healthz"); err == nil {
		t.Fatal("a self-signed certificate was accepted by a default client")
	}
	do := func(method, path, token, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := trusting.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	code, body := do("POST", "/api/tokens", "boot", `{"name":"r","role":"reader"}`)
	if code != 200 {
		t.Fatalf("create token: %d %s", code, body)
	}
	var created struct {
		Data struct{ Token string } `json:"data"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	reader := created.Data.Token
	for path, want := range map[string]int{"/metrics": 200, "/api/stats/throughput": 200, "/api/tasks": 200} {
		if code, _ := do("GET", path, reader, ""); code != want {
			t.Errorf("reader GET %s: %d, want %d", path, code, want)
		}
		if code, _ := do("GET", path, "", ""); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
	}
	if code, _ := do("POST", "/api/tasks", reader, `{"kind":"k","task":1}`); code != 403 {
		t.Errorf("reader submit: %d, want 403", code)
	}
	// The UI's login over TLS sets a Secure, HttpOnly, SameSite=Strict cookie.
	resp, err := trusting.PostForm(base+"/login", url.Values{"token": {reader}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "rota_token" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.Secure || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookie %+v", resp.StatusCode, cookie)
	}
}
