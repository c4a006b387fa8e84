package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

const secret = "s3cret-value-that-must-not-leak"

// fakeResolver answers from a map, so rules over names are tested without DNS.
type fakeResolver map[string][]string

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	var out []net.IPAddr
	for _, s := range f[host] {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

var names = fakeResolver{
	"api.example.com":      {"203.0.113.7"},
	"a.example.com":        {"203.0.113.8"},
	"a.b.example.com":      {"203.0.113.9"},
	"example.com":          {"203.0.113.10"},
	"evilexample.com":      {"203.0.113.11"},
	"internal.example.com": {"10.0.0.5"},
	"meta.example.com":     {"169.254.169.254"},
	"localhost":            {"127.0.0.1"},
}

func newProxy(t *testing.T, opts Options) *Proxy {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(n string) (string, bool) {
			if n == "TOKEN" {
				return secret, true
			}
			return "", false
		}
	}
	if opts.Resolver == nil {
		opts.Resolver = names
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func openSession(t *testing.T, p *Proxy, spec api.EgressSpec) *Session {
	t.Helper()
	if spec.Agent == "" {
		spec.Agent = "box"
	}
	s, err := p.Open(t.Name(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDialTargetMatrix: which host:port each rule lets through, and where the proxy
// dials (the address it checked), or the reason a command reads.
func TestDialTargetMatrix(t *testing.T) {
	t.Parallel()
	p := newProxy(t, Options{})
	for _, tc := range []struct {
		allow      []string
		host       string
		port       int
		addr, deny string
	}{
		{[]string{"api.example.com"}, "api.example.com", 443, "203.0.113.7:443", ""},
		{[]string{"api.example.com"}, "api.example.com", 80, "203.0.113.7:80", ""},
		{[]string{"api.example.com"}, "api.example.com", 8443, "", "egress to api.example.com:8443 is not allowed for agent box"},
		{[]string{"api.example.com:8443"}, "api.example.com", 8443, "203.0.113.7:8443", ""},
		{[]string{"api.example.com:8443"}, "api.example.com", 443, "", "egress to api.example.com:443 is not allowed for agent box"},
		{[]string{"API.Example.com."}, "api.example.com", 443, "203.0.113.7:443", ""},
		{[]string{"*.example.com"}, "a.example.com", 443, "203.0.113.8:443", ""},
		{[]string{"*.example.com"}, "a.b.example.com", 443, "203.0.113.9:443", ""},
		{[]string{"*.example.com"}, "example.com", 443, "", "egress to example.com:443 is not allowed for agent box"},
		{[]string{"*.example.com"}, "evilexample.com", 443, "", "egress to evilexample.com:443 is not allowed for agent box"},
		{[]string{"example.com"}, "a.example.com", 443, "", "egress to a.example.com:443 is not allowed for agent box"},
		{[]string{"internal.example.com"}, "internal.example.com", 443, "", "internal.example.com resolves to a private address (10.0.0.5)"},
		{[]string{"meta.example.com"}, "meta.example.com", 80, "", "meta.example.com resolves to a link-local or cloud metadata address"},
		{[]string{"localhost:8080"}, "localhost", 8080, "", "localhost resolves to a private address (127.0.0.1)"},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1", 8080, "127.0.0.1:8080", ""},
		{[]string{"127.0.0.1:9090"}, "127.0.0.1", 8080, "", "egress to 127.0.0.1:8080 is not allowed for agent box"},
		{[]string{"*.example.com"}, "127.0.0.1", 443, "", "egress to 127.0.0.1:443 is not allowed for agent box"},
		{[]string{"10.0.0.1"}, "10.0.0.1", 443, "10.0.0.1:443", ""},
		{[]string{"*.example.com"}, "169.254.169.254", 80, "", "egress to 169.254.169.254:80 is not allowed for agent box"},
		{[]string{"nowhere.example.com"}, "nowhere.example.com", 443, "", "nowhere.example.com does not resolve"},
	} {
		t.Run(fmt.Sprintf("%v/%s:%d", tc.allow, tc.host, tc.port), func(t *testing.T) {
			pol, err := newPolicy(api.EgressSpec{Allow: tc.allow, Agent: "box"}, p.opts.LookupEnv)
			if err != nil {
				t.Fatal(err)
			}
			s := &Session{p: p, pol: pol}
			addr, deny := s.dialTarget(context.Background(), tc.host, tc.port)
			if addr != tc.addr || !strings.HasPrefix(deny, tc.deny) || (tc.deny == "" && deny != "") {
				t.Errorf("dialTarget(%s:%d) = %q, %q; want %q, %q", tc.host, tc.port, addr, deny, tc.addr, tc.deny)
			}
		})
	}
}

// dialSession connects to the session's socket as the forwarder does: the token line first.
func dialSession(ctx context.Context, s *Session) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", s.Socket)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, s.Token+"\n"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// client is an HTTP client whose proxy is the session's socket, as the sandbox's
// forwarder makes it; roots verifies the TLS servers it talks to.
func client(s *Session, roots *x509.CertPool) *http.Client {
	proxy, _ := url.Parse("http://127.0.0.1:3128")
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxy),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSession(ctx, s)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}, Timeout: 10 * time.Second}
}

// headerServer answers with the Authorization header it got.
func headerServer(tlsOn bool) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "auth=%q path=%s", r.Header.Get("Authorization"), r.URL.Path)
	})
	if tlsOn {
		return httptest.NewTLSServer(h)
	}
	return httptest.NewServer(h)
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer from-the-sandbox")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func noSecret(t *testing.T, recs []api.EgressRecord) {
	t.Helper()
	b, _ := json.Marshal(recs)
	if strings.Contains(string(b), secret) || strings.Contains(string(b), "from-the-sandbox") {
		t.Errorf("records hold a header value: %s", b)
	}
}

// TestInjectPlainHTTP: a plain request to an inject host gets the secret in place of the
// sandbox's own header; the record names the header, never its value.
func TestInjectPlainHTTP(t *testing.T) {
	t.Parallel()
	srv := headerServer(false)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p := newProxy(t, Options{})
	s := openSession(t, p, api.EgressSpec{Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "authorization", ValueEnv: "TOKEN", Format: "Bearer {}"}}})
	code, body := get(t, client(s, nil), srv.URL+"/repo")
	if want := fmt.Sprintf("auth=%q path=/repo", "Bearer "+secret); code != 200 || body != want {
		t.Fatalf("GET = %d %q, want 200 %q", code, body, want)
	}
	recs, dropped := s.Drain(time.Second)
	if len(recs) != 1 || dropped != 0 {
		t.Fatalf("records = %+v (dropped %d), want one", recs, dropped)
	}
	r := recs[0]
	if r.Host != "127.0.0.1" || fmt.Sprint(r.Port) != u.Port() || r.Method != "GET" || r.Status != 200 ||
		r.Injected != "Authorization" || r.BytesDown != int64(len(body)) || r.Denied != "" {
		t.Errorf("record = %+v", r)
	}
	noSecret(t, recs)
}

// TestDeniedHostGets403: an unlisted host is refused with 403 and a one-line reason, and
// recorded; so is a loopback name (the SSRF guard) and a request to the proxy itself.
func TestDeniedHostGets403(t *testing.T) {
	t.Parallel()
	srv := headerServer(false)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p := newProxy(t, Options{})
	s := openSession(t, p, api.EgressSpec{Allow: []string{"localhost:" + u.Port(), "api.example.com"}})
	c := client(s, nil)
	code, body := get(t, c, srv.URL+"/")
	if want := "egress to " + u.Host + " is not allowed for agent box\n"; code != 403 || body != want {
		t.Errorf("unlisted: GET = %d %q, want 403 %q", code, body, want)
	}
	code, body = get(t, c, "http://localhost:"+u.Port()+"/")
	if want := "localhost resolves to a private address (127.0.0.1)\n"; code != 403 || body != want {
		t.Errorf("loopback name: GET = %d %q, want 403 %q", code, body, want)
	}
	// CONNECT to a host not listed: refused before any tunnel.
	if _, err := c.Get("https://" + u.Host + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to an unlisted host: %v, want a 403 Forbidden", err)
	}
	// Origin-form: the proxy has no pages of its own.
	conn, err := dialSession(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /admin HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "nothing of its own") {
		t.Errorf("GET /admin to the proxy = %d %q, want 400 saying it has nothing of its own", resp.StatusCode, b)
	}
	recs, _ := s.Drain(time.Second)
	if len(recs) != 4 {
		t.Fatalf("records = %+v, want 4", recs)
	}
	for i, want := range []string{"is not allowed for agent box", "resolves to a private address", "is not allowed for agent box", "request addressed to the proxy itself"} {
		if !strings.Contains(recs[i].Denied, want) || recs[i].BytesUp != 0 || recs[i].BytesDown != 0 {
			t.Errorf("record %d = %+v, want denied %q and no bytes", i, recs[i], want)
		}
	}
	if recs[2].Method != "CONNECT" || recs[2].Status != 403 {
		t.Errorf("CONNECT record = %+v", recs[2])
	}
}

// TestConnectTunnel: an allowed https host without inject is tunnelled as is: the
// sandbox verifies the real server, nothing is added, the record counts the bytes.
func TestConnectTunnel(t *testing.T) {
	t.Parallel()
	srv := headerServer(true)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p := newProxy(t, Options{})
	s := openSession(t, p, api.EgressSpec{Allow: []string{u.Host}})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	code, body := get(t, client(s, roots), srv.URL+"/t")
	if want := `auth="Bearer from-the-sandbox" path=/t`; code != 200 || body != want {
		t.Fatalf("GET = %d %q, want 200 %q", code, body, want)
	}
	recs, _ := s.Drain(2 * time.Second)
	if len(recs) != 1 || recs[0].Method != "CONNECT" || recs[0].Status != 200 || recs[0].BytesUp == 0 || recs[0].BytesDown == 0 || recs[0].Injected != "" {
		t.Errorf("records = %+v, want one CONNECT 200 with bytes both ways", recs)
	}
}

// TestInjectTLS: for an https inject host the proxy decrypts with the worker's CA (which
// the sandbox trusts), adds the header and sends the request on over verified TLS.
func TestInjectTLS(t *testing.T) {
	t.Parallel()
	srv := headerServer(true)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	upstream := x509.NewCertPool()
	upstream.AddCert(srv.Certificate())
	p := newProxy(t, Options{UpstreamRoots: upstream})
	s := openSession(t, p, api.EgressSpec{Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "TOKEN", Format: "token {}"}}})
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(p.CACert()) {
		t.Fatal("CA certificate does not parse")
	}
	code, body := get(t, client(s, ca), srv.URL+"/api")
	if want := fmt.Sprintf("auth=%q path=/api", "token "+secret); code != 200 || body != want {
		t.Fatalf("GET = %d %q, want 200 %q", code, body, want)
	}
	recs, _ := s.Drain(2 * time.Second)
	if len(recs) != 1 || recs[0].Method != "GET" || recs[0].Status != 200 || recs[0].Injected != "Authorization" || recs[0].BytesDown != int64(len(body)) {
		t.Errorf("records = %+v, want one GET 200 with the header named", recs)
	}
	noSecret(t, recs)

	// A command that does not trust the CA gets no answer, and the record says why.
	if _, err := client(s, upstream).Get(srv.URL + "/api"); err == nil {
		t.Error("a client that does not trust the worker's CA got an answer")
	}
	recs, _ = s.Drain(2 * time.Second)
	if len(recs) != 1 || !strings.Contains(recs[0].Error, "TLS handshake with the sandbox failed") {
		t.Errorf("records = %+v, want the failed handshake", recs)
	}

	// The proxy checks the upstream against its roots: a CA it does not know fails.
	p2 := newProxy(t, Options{})
	s2 := openSession(t, p2, api.EgressSpec{Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "TOKEN"}}})
	ca2 := x509.NewCertPool()
	ca2.AppendCertsFromPEM(p2.CACert())
	if code, _ := get(t, client(s2, ca2), srv.URL+"/api"); code != http.StatusBadGateway {
		t.Errorf("GET through a proxy that cannot verify the upstream = %d, want 502", code)
	}
}

// TestDrainCapsRecords: one call keeps at most api.MaxEgressRecords records and counts
// the rest.
func TestDrainCapsRecords(t *testing.T) {
	t.Parallel()
	p := newProxy(t, Options{})
	s := openSession(t, p, api.EgressSpec{Allow: []string{"api.example.com"}})
	c := client(s, nil)
	for i := 0; i < api.MaxEgressRecords+5; i++ {
		if code, _ := get(t, c, "http://127.0.0.9/"); code != 403 {
			t.Fatalf("GET = %d, want 403", code)
		}
	}
	recs, dropped := s.Drain(time.Second)
	if len(recs) != api.MaxEgressRecords || dropped != 5 {
		t.Errorf("Drain = %d records, %d dropped; want %d and 5", len(recs), dropped, api.MaxEgressRecords)
	}
	if recs, dropped := s.Drain(0); len(recs) != 0 || dropped != 0 {
		t.Errorf("second Drain = %d, %d; want nothing", len(recs), dropped)
	}
}

// TestOpenRefusesUnsetSecret: a session whose inject names an unset variable is refused,
// naming the field.
func TestOpenRefusesUnsetSecret(t *testing.T) {
	t.Parallel()
	p := newProxy(t, Options{})
	_, err := p.Open("k", api.EgressSpec{Agent: "box", Allow: []string{"api.example.com"},
		Inject: []api.EgressInject{{Host: "api.example.com", Header: "Authorization", ValueEnv: "MISSING"}}})
	if err == nil || !strings.Contains(err.Error(), "agents[box].sandbox.egress.inject[0].value_env: MISSING: egress secret is not set") {
		t.Errorf("Open = %v, want the unset value_env named", err)
	}
}

// TestCABundle: the bundle a sandbox trusts holds the worker's CA certificate and no key.
func TestCABundle(t *testing.T) {
	t.Parallel()
	p := newProxy(t, Options{})
	b, err := readFile(p.CABundle())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b, string(p.CACert())) || strings.Contains(b, "PRIVATE KEY") {
		t.Errorf("CA bundle: has the CA %v, has a key %v", strings.Contains(b, string(p.CACert())), strings.Contains(b, "PRIVATE KEY"))
	}
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

// TestSocketNeedsToken: a process of the worker's user that opens a session's socket
// without the session's token (a local-tier command that found it) gets nothing: the
// connection is closed unanswered and nothing is recorded.
func TestSocketNeedsToken(t *testing.T) {
	t.Parallel()
	srv := headerServer(false)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p := newProxy(t, Options{})
	s := openSession(t, p, api.EgressSpec{Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "TOKEN"}}})
	for _, first := range []string{"", "wrong-token\n", strings.Repeat("a", 64) + "\n"} {
		c, err := net.Dial("unix", s.Socket)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%sGET %s/ HTTP/1.1\r\nHost: %s\r\n\r\n", first, srv.URL, u.Host)
		b, _ := io.ReadAll(c)
		c.Close()
		if len(b) != 0 {
			t.Errorf("a connection starting %q got an answer: %q", first, b)
		}
	}
	if recs, _ := s.Drain(time.Second); len(recs) != 0 {
		t.Errorf("records = %+v, want none", recs)
	}
}

// TestGuardMetadataAlways: the SSRF guard refuses link-local and metadata addresses even
// where an allow entry names them exactly (the config refuses such entries too), and lets
// an exactly named loopback or private address through.
func TestGuardMetadataAlways(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ip    string
		exact bool
		ok    bool
	}{
		{"169.254.169.254", true, false}, {"fd00:ec2::254", true, false}, {"fe80::1", true, false},
		{"127.0.0.1", false, false}, {"127.0.0.1", true, true}, {"10.1.2.3", false, false}, {"10.1.2.3", true, true},
		{"203.0.113.7", false, true},
	} {
		if got := guard(net.ParseIP(tc.ip), tc.exact) == ""; got != tc.ok {
			t.Errorf("guard(%s, exact %v) lets it through: %v, want %v", tc.ip, tc.exact, got, tc.ok)
		}
	}
}
