package bwrap

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/egress"
)

// TestEgressThroughProxy: a sealed command's curl reaches a listed loopback server only
// through the proxy, which adds the secret; the command's environment, its /proc and
// its workspace never hold the secret, and an unlisted host gets the proxy's 403.
func TestEgressThroughProxy(t *testing.T) {
	requireBwrap(t)
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl is missing under CI (.ci/run installs it): %v", err)
		}
		t.Skip("no /usr/bin/curl on this host")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p, err := egress.New(egress.Options{Dir: t.TempDir(), LookupEnv: func(n string) (string, bool) { return secret, n == "GIT_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	spec := api.EgressSpec{Agent: "box", Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "GIT_TOKEN", Format: "Bearer {}"}}}
	sess, err := p.Open("run-1", spec)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := egress.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, Options{Egress: &Egress{Forwarder: fwd, Socket: sess.Socket, Token: sess.Token, Bundle: p.CABundle(), Allow: spec.Allow}})

	res := run(t, w.sb, "curl -sS "+srv.URL+"/x")
	if want := "auth=Bearer " + secret; res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("curl through the proxy = %d %q %q, want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	// The server got the secret; the sandbox never had it.
	res = run(t, w.sb, "env; cat /proc/self/environ /proc/1/environ; grep -r . "+w.dir+" 2>/dev/null; echo done")
	if strings.Contains(res.Stdout+res.Stderr, secret) || !strings.Contains(res.Stdout, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("the sandbox sees the secret, or no proxy: %q", res.Stdout)
	}
	// Nor its session's token: not an argument, an environment or a descriptor left open.
	res = run(t, w.sb, "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null; cat <&4 2>/dev/null; ls -l /proc/self/fd; echo done")
	if strings.Contains(res.Stdout, sess.Token) || !strings.Contains(res.Stdout, "done") {
		t.Errorf("the sandbox can read the session's token: %q", res.Stdout)
	}
	res = run(t, w.sb, "curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.2:"+u.Port()+"/; echo; curl -sS http://127.0.0.2:"+u.Port()+"/")
	if want := "403\negress to 127.0.0.2:" + u.Port() + " is not allowed for agent box\n"; res.Stdout != want {
		t.Errorf("unlisted host = %q %q, want %q", res.Stdout, res.Stderr, want)
	}
	// No way around the proxy: the sandbox's own network has only loopback.
	res = run(t, w.sb, "curl -sS --noproxy '*' --max-time 5 "+srv.URL+"/")
	if res.ExitCode == 0 {
		t.Errorf("a command reached the host's server without the proxy: %q", res.Stdout)
	}
	// The forwarder runs the command and passes on its status and output.
	if res := run(t, w.sb, "echo out; echo err >&2; exit 3"); res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("a failing command under the forwarder = %d %q %q, want 3 out err", res.ExitCode, res.Stdout, res.Stderr)
	}
	recs, _ := sess.Drain(time.Second)
	if len(recs) != 3 || recs[0].Status != 200 || recs[0].Injected != "Authorization" || recs[1].Status != 403 || recs[2].Status != 403 {
		t.Errorf("records = %+v, want the allowed GET and two refusals", recs)
	}
	if w.sb.Instructions() == InstructionsFor(w.dir) || !strings.Contains(w.sb.Instructions(), u.Host) {
		t.Errorf("instructions do not tell the model of its hosts: %s", w.sb.Instructions())
	}
}

// TestEgressHTTPSThroughProxy: a sealed curl to an https inject host trusts the proxy's
// CA through the bundle in its environment (no -k), and the server, reached over TLS the
// proxy verified, gets the header.
func TestEgressHTTPSThroughProxy(t *testing.T) {
	requireBwrap(t)
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl is missing under CI (.ci/run installs it): %v", err)
		}
		t.Skip("no /usr/bin/curl on this host")
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p, err := egress.New(egress.Options{Dir: t.TempDir(), UpstreamRoots: roots, LookupEnv: func(n string) (string, bool) { return secret, n == "GIT_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	spec := api.EgressSpec{Agent: "box", Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "Authorization", ValueEnv: "GIT_TOKEN", Format: "token {}"}}}
	sess, err := p.Open("run-tls", spec)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := egress.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, Options{Egress: &Egress{Forwarder: fwd, Socket: sess.Socket, Token: sess.Token, Bundle: p.CABundle(), Allow: spec.Allow}})
	res := run(t, w.sb, "curl -sS "+srv.URL+"/api")
	if want := "auth=token " + secret; res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("curl https through the proxy = %d %q %q, want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	recs, _ := sess.Drain(time.Second)
	if len(recs) != 1 || recs[0].Method != "GET" || recs[0].Status != 200 || recs[0].Injected != "Authorization" {
		t.Errorf("records = %+v, want the decrypted GET", recs)
	}
}
