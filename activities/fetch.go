package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/netguard"
)

// Fetcher serves the fetch tool: an allow-listed host, resolved once and vetted (no
// private, loopback, link-local, CGNAT, multicast or unspecified address), then dialled at
// exactly the vetted address (so DNS rebinding between check and connect cannot redirect
// it), no redirects followed, a timeout, and a capped body.
//
// Fetch runs on the worker, not in the sandbox: a sandbox without network does not
// constrain it, which is why it has its own allow-list.
type Fetcher struct {
	// Resolve looks a host up (default: the system resolver).
	Resolve func(ctx context.Context, host string) ([]net.IP, error)
	// AllowAddr vets an address (default: public unicast only). Tests may widen it.
	AllowAddr func(ip net.IP) bool
	// Timeout bounds the whole request (default 20s).
	Timeout time.Duration
}

// NewFetcher returns a Fetcher with safe defaults.
func NewFetcher() *Fetcher {
	return &Fetcher{
		Resolve: func(ctx context.Context, host string) ([]net.IP, error) {
			addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
			ips := make([]net.IP, len(addrs))
			for i, a := range addrs {
				ips[i] = a.IP
			}
			return ips, err
		},
		AllowAddr: PublicAddr,
		Timeout:   20 * time.Second,
	}
}

// PublicAddr reports whether ip is a public unicast address (the guard netguard.Public).
func PublicAddr(ip net.IP) bool { return netguard.Public(ip) }

// HostAllowed reports whether host is on the allow-list: an entry or a subdomain of one.
// "example.com" allows "docs.example.com" but not "example.com.evil.net" or "badexample.com".
func HostAllowed(host string, allow []string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, a := range allow {
		a = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), ".")
		if a != "" && (host == a || strings.HasSuffix(host, "."+a)) {
			return true
		}
	}
	return false
}

// Fetch returns what the model sees of rawURL.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, allow []string) api.RunToolResult {
	u, err := url.Parse(rawURL)
	if err != nil {
		return toolError("fetch: %q is not a URL: %v", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return toolError("fetch: only http and https URLs can be fetched (got %q)", u.Scheme)
	}
	host := u.Hostname()
	if len(allow) == 0 {
		return toolError("fetch: this agent has no fetch allow-list, so it cannot fetch")
	}
	if !HostAllowed(host, allow) {
		return toolError("fetch: host %s is not in fetch allow-list (%s)", host, strings.Join(allow, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = f.Resolve(ctx, host); err != nil || len(ips) == 0 {
		return toolError("fetch: cannot resolve %s: %v", host, err)
	}
	for _, ip := range ips {
		if !f.AllowAddr(ip) {
			return toolError("fetch: %s resolves to %s, a private/loopback/link-local or reserved address; refused", host, ip)
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	pinned := net.JoinHostPort(ips[0].String(), port)
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	client := &http.Client{
		Transport: &http.Transport{
			Proxy: nil, // a proxy would dial for us and defeat the pinning
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, pinned)
			},
			TLSHandshakeTimeout: 10 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return toolError("fetch %s: %v", rawURL, err)
	}
	req.Header.Set("User-Agent", "nexo-fetch/1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return toolError("fetch %s: timed out after %v", rawURL, f.Timeout)
		}
		return toolError("fetch %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return toolError("fetch %s: HTTP %d redirect to %q, not followed; fetch that URL if its host is allowed",
			rawURL, resp.StatusCode, resp.Header.Get("Location"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, ReadCap+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return toolError("fetch %s: timed out after %v while reading the body", rawURL, f.Timeout)
		}
		return toolError("fetch %s: reading the body: %v", rawURL, err)
	}
	note := ""
	if len(body) > ReadCap {
		body = headUTF8(body, ReadCap) // a cut inside a character would make text look binary
		note = fmt.Sprintf("\n[truncated at %d bytes]", ReadCap)
	}
	text := string(body)
	if !utf8.Valid(body) {
		text = fmt.Sprintf("[binary body, %d bytes, %s]", len(body), resp.Header.Get("Content-Type"))
	}
	res := api.RunToolResult{Content: fmt.Sprintf("HTTP %d %s\n\n%s%s", resp.StatusCode, resp.Header.Get("Content-Type"), text, note)}
	res.IsError = resp.StatusCode >= 400
	return res
}
