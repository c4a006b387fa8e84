package activities_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
)

var loopback = net.IPv4(127, 0, 0, 1)

// loopbackFetcher returns a Fetcher that resolves the given hosts to 127.0.0.1 and, for
// the test only, allows that one address (and no other).
func loopbackFetcher(t *testing.T, hosts ...string) *activities.Fetcher {
	t.Helper()
	return &activities.Fetcher{
		Resolve: func(_ context.Context, host string) ([]net.IP, error) {
			for _, h := range hosts {
				if host == h {
					return []net.IP{loopback}, nil
				}
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
		AllowAddr: func(ip net.IP) bool { return ip.Equal(loopback) },
		Timeout:   5 * time.Second,
	}
}

// countingServer serves body on 127.0.0.1 and counts the requests it gets.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32, int) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits, srv.Listener.Addr().(*net.TCPAddr).Port
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host  string
		allow []string
		want  bool
	}{
		{"example.com", []string{"example.com"}, true},
		{"docs.example.com", []string{"example.com"}, true},
		{"a.b.example.com", []string{"example.com"}, true},
		{"EXAMPLE.COM.", []string{"example.com"}, true},
		{"Docs.Example.Com", []string{" EXAMPLE.com. "}, true},
		{"example.com", []string{"other.org", "example.com"}, true},
		{"example.com.evil.net", []string{"example.com"}, false},
		{"badexample.com", []string{"example.com"}, false},
		{"notexample.com", []string{"example.com"}, false},
		{"example.co", []string{"example.com"}, false},
		{"com", []string{"example.com"}, false},
		{"example.com", []string{"docs.example.com"}, false},
		{"example.com", nil, false},
		{"example.com", []string{}, false},
		{"example.com", []string{""}, false},
		{"example.com", []string{"."}, false},
		{"", []string{"example.com"}, false},
		{"", []string{""}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s in %q", tt.host, tt.allow), func(t *testing.T) {
			if got := activities.HostAllowed(tt.host, tt.allow); got != tt.want {
				t.Errorf("HostAllowed(%q, %q) = %v, want %v", tt.host, tt.allow, got, tt.want)
			}
		})
	}
}

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.0.0.5", false},
		{"172.16.3.4", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"169.254.169.254", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"100.64.1.1", false},
		{"100.127.255.254", false},
		{"198.18.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"::1", false},
		{"::", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"ff02::1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"64:ff9b::a00:1", false},
		{"2001:db8::1", false},
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"172.32.0.1", true},
		{"100.128.0.1", true},
		{"2606:4700::1111", true},
		{"::ffff:8.8.8.8", true},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			ip := net.ParseIP(tt.ip)
			if ip == nil {
				t.Fatalf("bad test address %q", tt.ip)
			}
			if got := activities.PublicAddr(ip); got != tt.want {
				t.Errorf("PublicAddr(%s) = %v, want %v", tt.ip, got, tt.want)
			}
		})
	}
	if activities.PublicAddr(nil) {
		t.Errorf("PublicAddr(nil) = true, want false")
	}
}

func TestFetchRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv, hits, port := countingServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") })
	tests := []struct {
		name string
		ips  []string
	}{
		{"RFC 1918", []string{"10.0.0.5"}},
		{"cloud metadata", []string{"169.254.169.254"}},
		{"unspecified (dials this host)", []string{"0.0.0.0"}},
		{"loopback (the live test server)", []string{"127.0.0.1"}},
		{"IPv6 loopback", []string{"::1"}},
		{"CGNAT", []string{"100.64.1.1"}},
		{"ULA", []string{"fc00::1"}},
		{"v4-mapped loopback", []string{"::ffff:127.0.0.1"}},
		{"any of several", []string{"8.8.8.8", "127.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := activities.NewFetcher() // the default vetting
			f.Resolve = func(context.Context, string) ([]net.IP, error) {
				var ips []net.IP
				for _, s := range tt.ips {
					ips = append(ips, net.ParseIP(s))
				}
				return ips, nil
			}
			f.Timeout = 5 * time.Second
			res := f.Fetch(context.Background(), fmt.Sprintf("http://docs.example.test:%d/", port), []string{"example.test"})
			wantErrorResult(t, res, "private/loopback")
			if strings.Contains(res.Content, "internal") {
				t.Errorf("content = %q, holds the internal body", res.Content)
			}
		})
	}
	t.Run("IP literal in the URL", func(t *testing.T) {
		f := activities.NewFetcher()
		var resolved atomic.Int32
		f.Resolve = func(context.Context, string) ([]net.IP, error) { resolved.Add(1); return nil, nil }
		for _, u := range []string{srv.URL, fmt.Sprintf("http://[::1]:%d/", port), fmt.Sprintf("http://0.0.0.0:%d/", port)} {
			res := f.Fetch(context.Background(), u, []string{"127.0.0.1", "::1", "0.0.0.0"})
			wantErrorResult(t, res, "private/loopback")
		}
		if n := resolved.Load(); n != 0 {
			t.Errorf("Resolve called %d times for IP literals, want 0", n)
		}
	})
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

func TestFetchRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	_, hits, port := countingServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "body") })
	f := loopbackFetcher(t, "docs.example.test", "example.test.evil.net", "badexample.test")
	var resolved atomic.Int32
	resolve := f.Resolve
	f.Resolve = func(ctx context.Context, host string) ([]net.IP, error) { resolved.Add(1); return resolve(ctx, host) }
	tests := []struct {
		name, url string
		allow     []string
		want      string
	}{
		{"off-list host", "http://docs.example.test:%d/", []string{"example.org"}, "not in fetch allow-list"},
		{"look-alike suffix", "http://example.test.evil.net:%d/", []string{"example.test"}, "not in fetch allow-list"},
		{"look-alike prefix", "http://badexample.test:%d/", []string{"example.test"}, "not in fetch allow-list"},
		{"userinfo trick", "http://example.test@127.0.0.1:%d/", []string{"example.test"}, "not in fetch allow-list"},
		{"empty allow-list", "http://docs.example.test:%d/", nil, "allow-list"},
		{"file URL", "file:///etc/passwd", []string{"example.test"}, "http"},
		{"ftp URL", "ftp://docs.example.test:%d/x", []string{"example.test"}, "http"},
		{"gopher URL", "gopher://docs.example.test:%d/", []string{"example.test"}, "http"},
		{"no scheme", "docs.example.test/page", []string{"example.test"}, "http"},
		{"not a URL", "http://docs.example.test:%d/%zz", []string{"example.test"}, "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.url
			if strings.Contains(u, "%d") {
				u = fmt.Sprintf(strings.ReplaceAll(u, "%zz", "%%zz"), port)
			}
			wantErrorResult(t, f.Fetch(context.Background(), u, tt.allow), tt.want)
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
	if n := resolved.Load(); n != 0 {
		t.Errorf("Resolve called %d times, want none: a refused URL is not looked up", n)
	}
}

func TestFetchSuccess(t *testing.T) {
	t.Parallel()
	type seen struct{ host, uri, ua, method string }
	got := make(chan seen, 1)
	_, hits, port := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.URL.RequestURI(), r.Header.Get("User-Agent"), r.Method}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "the documentation")
	})
	f := loopbackFetcher(t, "docs.example.test", "api.docs.example.test")

	for _, host := range []string{"docs.example.test", "api.docs.example.test"} {
		t.Run(host, func(t *testing.T) {
			res := f.Fetch(context.Background(), fmt.Sprintf("http://%s:%d/guide/intro?lang=go", host, port), []string{"example.test"})
			wantOK(t, res)
			if !strings.Contains(res.Content, "HTTP 200") || !strings.Contains(res.Content, "text/plain") ||
				!strings.HasSuffix(res.Content, "\n\nthe documentation") {
				t.Errorf("content = %q, want the status, type and body", res.Content)
			}
			s := <-got
			if want := fmt.Sprintf("%s:%d", host, port); s.host != want {
				t.Errorf("Host header = %q, want %q", s.host, want)
			}
			if s.uri != "/guide/intro?lang=go" || s.method != http.MethodGet {
				t.Errorf("request = %s %s, want GET /guide/intro?lang=go", s.method, s.uri)
			}
			if !strings.HasPrefix(strings.ToLower(s.ua), "nexo") {
				t.Errorf("User-Agent = %q, want Nexo's", s.ua)
			}
		})
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the server got %d requests, want 2", n)
	}
}

func TestFetchStatusAndBody(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such page", http.StatusNotFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 250_000)))
	})
	mux.HandleFunc("/big-utf8", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(strings.Repeat("日", 100_000))) // 3 bytes each: the cap falls inside one
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	_, _, port := countingServer(t, mux.ServeHTTP)
	f := loopbackFetcher(t, "docs.example.test")
	url := func(p string) string { return fmt.Sprintf("http://docs.example.test:%d%s", port, p) }

	t.Run("error status keeps the body", func(t *testing.T) {
		res := f.Fetch(context.Background(), url("/missing"), []string{"example.test"})
		wantErrorResult(t, res, "HTTP 404", "no such page")
	})
	t.Run("body over the cap", func(t *testing.T) {
		res := f.Fetch(context.Background(), url("/big"), []string{"example.test"})
		wantOK(t, res)
		_, body, _ := strings.Cut(res.Content, "\n\n")
		if n := strings.Count(body, "x"); n != activities.ReadCap {
			t.Errorf("content holds %d bytes of the body, want %d", n, activities.ReadCap)
		}
		if !strings.HasSuffix(res.Content, fmt.Sprintf("[truncated at %d bytes]", activities.ReadCap)) {
			t.Errorf("content ends %q, want a truncation note", res.Content[len(res.Content)-60:])
		}
	})
	t.Run("text over the cap stays text", func(t *testing.T) {
		res := f.Fetch(context.Background(), url("/big-utf8"), []string{"example.test"})
		wantOK(t, res)
		_, body, _ := strings.Cut(res.Content, "\n\n")
		if strings.Contains(body, "binary body") || strings.Count(body, "日") != activities.ReadCap/3 {
			t.Errorf("content starts %q and holds %d characters, want %d whole characters of text",
				body[:min(len(body), 60)], strings.Count(body, "日"), activities.ReadCap/3)
		}
	})
	t.Run("binary body", func(t *testing.T) {
		res := f.Fetch(context.Background(), url("/binary"), []string{"example.test"})
		if !strings.Contains(res.Content, "binary body") || strings.Contains(res.Content, "\xff") {
			t.Errorf("content = %q, want a note instead of the bytes", res.Content)
		}
	})
}

// The address that was vetted is the one dialled: a second lookup (DNS rebinding) never
// happens, and the host name is never handed to the system resolver.
func TestFetchPinsTheVettedAddress(t *testing.T) {
	t.Parallel()
	_, hits, port := countingServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "vetted") })
	var calls atomic.Int32
	f := &activities.Fetcher{
		Resolve: func(context.Context, string) ([]net.IP, error) {
			if calls.Add(1) == 1 {
				return []net.IP{loopback, net.IPv4(127, 0, 0, 2)}, nil
			}
			return []net.IP{net.ParseIP("169.254.169.254")}, nil // the rebound answer
		},
		AllowAddr: func(ip net.IP) bool { return ip.IsLoopback() },
		Timeout:   5 * time.Second,
	}
	for range 2 { // a second fetch is vetted afresh: the rebound answer is refused
		_ = f.Fetch(context.Background(), fmt.Sprintf("http://rebind.example.test:%d/", port), []string{"example.test"})
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("Resolve called %d times for 2 fetches, want once per fetch", n)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server got %d requests, want 1 (the first fetch, at the vetted address)", n)
	}

	calls.Store(0)
	res := f.Fetch(context.Background(), fmt.Sprintf("http://rebind.example.test:%d/", port), []string{"example.test"})
	wantOK(t, res)
	if !strings.Contains(res.Content, "vetted") {
		t.Errorf("content = %q, want the body from 127.0.0.1 (the first vetted address)", res.Content)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Resolve called %d times for one fetch, want 1", n)
	}
}

func TestFetchDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/target", http.StatusFound) })
	mux.HandleFunc("/meta", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { targetHits.Add(1); fmt.Fprint(w, "target") })
	_, _, port := countingServer(t, mux.ServeHTTP)
	f := loopbackFetcher(t, "docs.example.test")
	tests := []struct{ path, want string }{
		{"/start", "/target"},
		{"/meta", "http://169.254.169.254/latest/meta-data/"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := f.Fetch(context.Background(), fmt.Sprintf("http://docs.example.test:%d%s", port, tt.path), []string{"example.test"})
			wantErrorResult(t, res, "redirect", tt.want)
		})
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want none", n)
	}
}

func TestFetchTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	_, _, port := countingServer(t, mux.ServeHTTP)
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	f := loopbackFetcher(t, "docs.example.test")
	f.Timeout = 200 * time.Millisecond

	tests := []struct{ path, want string }{
		{"/slow-headers", "timed out"},
		{"/slow-body", ""}, // any error result, in bounded time
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			start := time.Now()
			res := f.Fetch(context.Background(), fmt.Sprintf("http://docs.example.test:%d%s", port, tt.path), []string{"example.test"})
			if tt.want != "" {
				wantErrorResult(t, res, tt.want)
			} else {
				wantErrorResult(t, res)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("fetch took %v with a 200ms timeout", d)
			}
		})
	}
}

// TLS is verified against the system roots: a server with an untrusted certificate is an
// error result and gets no request.
func TestFetchVerifiesTLS(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f := loopbackFetcher(t, "example.com") // the name httptest's certificate is for
	res := f.Fetch(context.Background(), fmt.Sprintf("https://example.com:%d/", port), []string{"example.com"})
	wantErrorResult(t, res, "certificate")
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests over an unverified connection", n)
	}
}
