package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// BenchmarkEgress is what the proxy adds to a request to a loopback server: "direct" is
// the request without it, "proxy" through a session's socket with a header injected; each
// request opens its own connections, as a command's curl does. Target: ≤ 5 ms added.
func BenchmarkEgress(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p, err := New(Options{Dir: b.TempDir(), LookupEnv: func(string) (string, bool) { return "tok", true }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s, err := p.Open("bench", api.EgressSpec{Agent: "bench", Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "T", Format: "Bearer {}"}}})
	if err != nil {
		b.Fatal(err)
	}
	proxy, _ := url.Parse("http://127.0.0.1:3128")
	for _, bc := range []struct {
		name string
		tr   *http.Transport
	}{
		{"direct", &http.Transport{DisableKeepAlives: true}},
		{"proxy", &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyURL(proxy),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialSession(ctx, s)
			}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &http.Client{Transport: bc.tr, Timeout: 10 * time.Second}
			for b.Loop() {
				resp, err := c.Get(srv.URL + "/")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			s.Drain(0)
		})
	}
}
