// Package netguard keeps the requests Rota sends on a user's behalf (a
// schedule's HTTP target) from being turned against Rota's own host and
// network (server-side request forgery).
//
// A Guard refuses, unless its allow list says otherwise:
//
//   - loopback (127.0.0.0/8, ::1) and unspecified (0.0.0.0/8, ::) addresses;
//   - private (10/8, 172.16/12, 192.168/16) and unique-local (fc00::/7) ones;
//   - link-local (169.254/16, which holds the cloud metadata address
//     169.254.169.254, and fe80::/10; also the old site-local fec0::/10);
//   - shared address space (CGNAT, 100.64/10);
//   - multicast (224/4, ff00::/8), broadcast and reserved (240/4);
//   - the IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) forms
//     of the IPv4 ones;
//   - schemes other than http and https.
//
// The check happens at dial time, on every address a host name resolves
// to, and the connection goes to the address that was checked (it is not
// resolved twice), so DNS rebinding cannot pass it; a redirect is a new
// dial and is checked the same way. CheckURL does the part of the check
// that needs no resolution (literal addresses and localhost), so that an
// API can refuse a bad target when it is saved.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Resolver resolves a host name to addresses (*net.Resolver implements
// it). Tests give a fake one: nothing here needs DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc dials a checked address ("ip:port"); net.Dialer.DialContext is
// one.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// MaxRedirects is how many redirects a Guard's client follows (each one
// checked again); the next one fails the request.
const MaxRedirects = 5

// Config configures a Guard. Zero values mean the defaults.
type Config struct {
	// Allow lists what is allowed although it falls in a refused range:
	// CIDRs ("10.1.0.0/16"), addresses ("127.0.0.2", "::1"), an address
	// with a port ("127.0.0.2:8080", "[::1]:8080"), or a host name with or
	// without a port ("hooks.internal", "hooks.internal:8443"; a name is
	// trusted with whatever it resolves to). Empty entries are ignored.
	Allow []string
	// Resolver resolves host names at dial time (default
	// net.DefaultResolver).
	Resolver Resolver
	// Dial opens the connections to checked addresses (default a
	// net.Dialer with a 30 s connect timeout).
	Dial DialFunc
}

// Guard decides which addresses Rota may send requests to. It is
// immutable and safe for concurrent use.
type Guard struct {
	prefixes []netip.Prefix   // allowed on any port
	addrs    []netip.AddrPort // allowed on one port
	names    []hostPort       // allowed host names; port 0 means any
	resolver Resolver
	dial     DialFunc
}

type hostPort struct {
	host string // lower case
	port uint16
}

// New parses cfg.Allow and returns the Guard; a malformed entry is an
// error naming it.
func New(cfg Config) (*Guard, error) {
	g := &Guard{resolver: cfg.Resolver, dial: cfg.Dial}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		g.dial = d.DialContext
	}
	for _, e := range cfg.Allow {
		if err := g.allow(strings.TrimSpace(e)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// SplitList splits a comma-separated allow list (ROTA_TARGET_ALLOW) into
// its entries, dropping empty ones.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (g *Guard) allow(e string) error {
	if e == "" {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("netguard: allow entry %q: %s (want a CIDR, an address, host or host:port)", e, why)
	}
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return bad("not a CIDR")
		}
		g.prefixes = append(g.prefixes, normPrefix(p.Masked()))
		return nil
	}
	if a, err := netip.ParseAddr(e); err == nil {
		a = norm(a)
		g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if ap, err := netip.ParseAddrPort(e); err == nil {
		if ap.Port() == 0 {
			return bad("port 0")
		}
		g.addrs = append(g.addrs, netip.AddrPortFrom(norm(ap.Addr()), ap.Port()))
		return nil
	}
	host, port := e, uint16(0)
	if h, p, err := net.SplitHostPort(e); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return bad("bad port")
		}
		host, port = h, uint16(n)
	}
	if !validHostName(host) {
		return bad("not a host name")
	}
	g.names = append(g.names, hostPort{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: port})
	return nil
}

// validHostName reports whether h looks like a DNS name.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// RefusedError is the error of a refused address or URL. Its message says
// what was refused and why; errors.As finds it through an http.Client's
// *url.Error.
type RefusedError struct {
	Host   string     // the host as given (a name or a literal); may be empty
	Addr   netip.Addr // the refused address; invalid for a refused scheme
	Reason string     // e.g. "loopback", "private", "link-local (cloud metadata)"
}

func (e *RefusedError) Error() string {
	if !e.Addr.IsValid() {
		return "refused: " + e.Reason
	}
	what := e.Addr.String()
	if e.Host != "" && e.Host != what {
		what = e.Host + " (" + what + ")"
	}
	return fmt.Sprintf("refused: address %s is %s; Rota does not send requests there unless --target-allow lists it", what, e.Reason)
}

// IsRefused reports whether err is or wraps a *RefusedError.
func IsRefused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}

// refusedRange is one refused range and why.
type refusedRange struct {
	p      netip.Prefix
	reason string
}

// refused lists the refused ranges, most specific first (the first match
// names the reason). IPv4-mapped and NAT64 forms are unmapped before the
// lookup.
var refused = func() []refusedRange {
	var out []refusedRange
	for _, r := range [][2]string{
		{"169.254.169.254/32", "link-local (the cloud metadata address)"},
		{"fd00:ec2::254/128", "unique-local (the cloud metadata address)"},
		{"255.255.255.255/32", "broadcast"},
		{"0.0.0.0/8", "unspecified (this network)"},
		{"127.0.0.0/8", "loopback"},
		{"10.0.0.0/8", "private"},
		{"172.16.0.0/12", "private"},
		{"192.168.0.0/16", "private"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"169.254.0.0/16", "link-local"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"fc00::/7", "unique-local"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"},
		{"ff00::/8", "multicast"},
	} {
		out = append(out, refusedRange{netip.MustParsePrefix(r[0]), r[1]})
	}
	return out
}()

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4
// address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// norm unmaps IPv4-mapped and NAT64 addresses to IPv4 and drops a zone.
func norm(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

func normPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// reason returns why a is refused, "" when it is in no refused range. a
// must be normalized.
func reason(a netip.Addr) string {
	for _, r := range refused {
		if r.p.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// CheckAddr returns a *RefusedError when a is in a refused range and the
// allow list does not list it (by CIDR or address; entries with a port or
// a host name do not count here). IPv4-mapped forms are checked as IPv4.
func (g *Guard) CheckAddr(a netip.Addr) error {
	return g.check("", netip.AddrPortFrom(a, 0))
}

// check checks the address of ap for host (the name it was resolved from,
// "" for none); a port of 0 matches no port-qualified entry.
func (g *Guard) check(host string, ap netip.AddrPort) error {
	a := norm(ap.Addr())
	if !a.IsValid() {
		return &RefusedError{Host: host, Reason: "not a valid address"}
	}
	why := reason(a)
	if why == "" {
		return nil
	}
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return nil
		}
	}
	if ap.Port() != 0 {
		for _, x := range g.addrs {
			if x.Addr() == a && x.Port() == ap.Port() {
				return nil
			}
		}
	}
	return &RefusedError{Host: host, Addr: a, Reason: why}
}

// nameAllowed reports whether host:port is allowed by name.
func (g *Guard) nameAllowed(host string, port uint16) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range g.names {
		if n.host == host && (n.port == 0 || n.port == port) {
			return true
		}
	}
	return false
}

// isLocalhost reports whether host is localhost or a name under it
// (RFC 6761: they resolve to loopback).
func isLocalhost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// CheckURL checks what can be checked of raw without resolving it: the
// scheme (http or https), and the host when it is a literal address or
// localhost. A host name passes; it is checked when it is dialed.
func (g *Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("netguard: %w", err)
	}
	return g.checkURL(u)
}

func (g *Guard) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &RefusedError{Reason: fmt.Sprintf("scheme %q (only http and https are allowed)", u.Scheme)}
	}
	host := u.Hostname()
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("netguard: bad port %q", p)
		}
		port = uint16(n)
	}
	if g.nameAllowed(host, port) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return g.check(host, netip.AddrPortFrom(a, port))
	}
	if isLocalhost(host) {
		// Allowed only when its loopback address is.
		if err := g.check(host, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)); err != nil {
			return err
		}
	}
	return nil
}

// DialContext resolves addr ("host:port"), checks every address it
// resolves to, and connects to the first that answers. A host allowed by
// name is not checked. Any refused address refuses the whole dial: a name
// that resolves to a public and a private address is not trusted with
// either.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", addr, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: bad port", addr)
	}
	port := uint16(n)
	var ips []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{a}
	} else if isLocalhost(host) {
		// RFC 6761: localhost is loopback, whatever a resolver says
		// (checked as 127.0.0.1, as in CheckURL).
		ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	} else {
		resolveNet := "ip"
		switch network {
		case "tcp4":
			resolveNet = "ip4"
		case "tcp6":
			resolveNet = "ip6"
		}
		if ips, err = g.resolver.LookupNetIP(ctx, resolveNet, host); err != nil {
			return nil, fmt.Errorf("netguard: resolve %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("netguard: resolve %s: no addresses", host)
		}
	}
	if !g.nameAllowed(host, port) {
		for _, a := range ips {
			if err := g.check(host, netip.AddrPortFrom(a, port)); err != nil {
				return nil, err
			}
		}
	}
	var errs []error
	for _, a := range ips {
		c, err := g.dial(ctx, network, netip.AddrPortFrom(a.Unmap(), port).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Transport returns an http.Transport that dials only through g and uses
// no proxy (a proxy would dial the target on its own, unchecked).
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client returns an http.Client over g.Transport that follows at most
// MaxRedirects redirects, checks each one's URL (CheckURL; its address is
// checked when it is dialed), and sends Authorization, Proxy-Authorization,
// Cookie and the headers named by WithSecretHeaders only to the first
// request's host (host and port).
func (g *Guard) Client() *http.Client {
	return &http.Client{Transport: g.Transport(), CheckRedirect: g.checkRedirect}
}

func (g *Guard) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	if err := g.checkURL(req.URL); err != nil {
		return err
	}
	if first := via[0].URL; !strings.EqualFold(canonicalHost(first), canonicalHost(req.URL)) {
		for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
			req.Header.Del(h)
		}
		for _, h := range secretHeaders(req.Context()) {
			req.Header.Del(h)
		}
	}
	return nil
}

// canonicalHost is u's host with its port made explicit.
func canonicalHost(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.TrimSuffix(u.Hostname(), "."), port)
}

type secretHeadersKey struct{}

// WithSecretHeaders returns ctx carrying header names that a Guard's
// client must not send past a redirect to another host (a schedule
// target's headers).
func WithSecretHeaders(ctx context.Context, names []string) context.Context {
	return context.WithValue(ctx, secretHeadersKey{}, append([]string(nil), names...))
}

func secretHeaders(ctx context.Context) []string {
	names, _ := ctx.Value(secretHeadersKey{}).([]string)
	return names
}
