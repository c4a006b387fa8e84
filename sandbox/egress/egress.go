// Package egress is the way out of a sealed sandbox: an HTTP proxy in the worker process
// that lets a sandbox's commands reach the hosts its agent lists, and nothing else, and
// adds credentials to their requests on the way out, so a secret never enters the sandbox.
//
// The sandbox keeps no network. Each sandbox gets a Session: a unix socket in a directory
// private to the worker, bound into the sandbox, where a forwarder (the worker's own
// executable run as ForwarderName, see forward.go) relays the connections its commands
// make to 127.0.0.1:ForwardPort. The socket a connection arrives on tells the proxy
// whose it is, so it needs no credentials of its own and offers nothing to anyone else.
//
// The proxy takes plain HTTP requests (absolute-form) and HTTPS CONNECT tunnels; it
// resolves names itself and dials the address it checked, with the SSRF guard of the
// fetch tool (internal/netguard). For a host with an inject rule it terminates TLS with a
// per-worker CA the sandbox trusts, adds the header, and sends the request on over TLS
// verified against the system's roots. Every request is kept as an api.EgressRecord
// (host, port, method, status, bytes; never a header or a body) until the tool call that
// made it drains the session.
package egress

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/netguard"
)

// Sentinel errors of the package.
var (
	// ErrSecretUnset: an inject rule names a variable the worker does not have.
	ErrSecretUnset = errors.New("egress secret is not set")
	// ErrClosed: the proxy was closed.
	ErrClosed = errors.New("egress proxy is closed")
)

// Options configures a Proxy. The zero value is usable.
type Options struct {
	// Dir is the private directory of the sockets and the CA bundle (made 0700); empty
	// makes a fresh one under the system's temporary directory, removed by Close.
	Dir string
	// LookupEnv reads the secrets inject rules name (the worker's in-memory copy of its
	// environment, internal/secrets); nil is os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// UpstreamRoots verifies the hosts the proxy decrypts for; nil is the system's roots.
	UpstreamRoots *x509.CertPool
	// Resolver resolves host names; nil is net.DefaultResolver (the host's).
	Resolver Resolver
	// DialTimeout bounds a connection to an upstream; 0 is 15 s.
	DialTimeout time.Duration
}

// Resolver is the part of *net.Resolver the proxy uses.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Proxy is the worker's egress proxy: one CA, one CA bundle, a session per sandbox. Safe
// for concurrent use.
type Proxy struct {
	opts    Options
	dir     string
	ownDir  bool
	ca      *authority
	bundle  string
	mu      sync.Mutex
	closed  bool
	next    int // names the sockets
	session map[string]*Session
}

// New starts the proxy: makes its CA and writes the CA bundle sandboxes trust. Sessions
// are opened per sandbox.
func New(opts Options) (*Proxy, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 15 * time.Second
	}
	p := &Proxy{opts: opts, dir: opts.Dir, session: map[string]*Session{}}
	if p.dir == "" {
		d, err := os.MkdirTemp("", "nexo-egress-*")
		if err != nil {
			return nil, fmt.Errorf("start egress proxy: %w", err)
		}
		p.dir, p.ownDir = d, true
	} else if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("start egress proxy: %w", err)
	}
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("start egress proxy: %w", err)
	}
	ca, err := newAuthority()
	if err != nil {
		return nil, fmt.Errorf("start egress proxy: %w", err)
	}
	p.ca = ca
	p.bundle = filepath.Join(p.dir, "ca-bundle.pem")
	// Readable by the sandbox through its bind mount; the directory keeps it from others.
	if err := os.WriteFile(p.bundle, ca.bundle(), 0o644); err != nil {
		return nil, fmt.Errorf("start egress proxy: write CA bundle: %w", err)
	}
	return p, nil
}

// CABundle is the path of the CA bundle a sandbox trusts (the system's roots and the
// proxy's CA certificate; never its key).
func (p *Proxy) CABundle() string { return p.bundle }

// CACert is the proxy's CA certificate in PEM.
func (p *Proxy) CACert() []byte { return append([]byte(nil), p.ca.certPEM...) }

// CheckSecrets says which inject rule of spec names a variable that is unset, naming the
// field under prefix: the worker's check at start.
func (p *Proxy) CheckSecrets(prefix string, spec api.EgressSpec) error {
	return checkSecrets(prefix, spec, p.opts.LookupEnv)
}

// CheckSecrets is Proxy.CheckSecrets before a proxy exists.
func CheckSecrets(prefix string, spec api.EgressSpec, lookup func(string) (string, bool)) error {
	return checkSecrets(prefix, spec, lookup)
}

func checkSecrets(prefix string, spec api.EgressSpec, lookup func(string) (string, bool)) error {
	var errs []error
	for i, in := range spec.Inject {
		if v, ok := lookup(in.ValueEnv); !ok || v == "" {
			errs = append(errs, fmt.Errorf("%s.inject[%d].value_env: %s: %w on this worker (set it before the worker starts)", prefix, i, in.ValueEnv, ErrSecretUnset))
		}
	}
	return errors.Join(errs...)
}

// Open starts the session of one sandbox, named key (unique among the proxy's open
// sessions; an open one of the same key is returned as is). Its socket is what the
// sandbox's forwarder connects to.
func (p *Proxy) Open(key string, spec api.EgressSpec) (*Session, error) {
	pol, err := newPolicy(spec, p.opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if s, ok := p.session[key]; ok {
		return s, nil
	}
	p.next++
	sock := filepath.Join(p.dir, fmt.Sprintf("s%d.sock", p.next))
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("open egress session: %w", err)
	}
	// The sandbox's user may be mapped to another uid than the worker's; the directory,
	// 0700, is what keeps other users out.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("open egress session: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		ln.Close()
		return nil, fmt.Errorf("open egress session: %w", err)
	}
	s := newSession(p, pol, sock, ln)
	s.Token = hex.EncodeToString(tok)
	p.session[key] = s
	go s.serve()
	return s, nil
}

// forget drops s from the open sessions, if it is still the one of its key.
func (p *Proxy) forget(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, o := range p.session {
		if o == s {
			delete(p.session, k)
		}
	}
}

// Session returns the open session of key, or nil.
func (p *Proxy) Session(key string) *Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session[key]
}

// Close ends every session and removes the proxy's own directory.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	sessions := p.session
	p.session = map[string]*Session{}
	p.mu.Unlock()
	keys := make([]string, 0, len(sessions))
	for k := range sessions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		errs = append(errs, sessions[k].Close())
	}
	if p.ownDir {
		errs = append(errs, os.RemoveAll(p.dir))
	}
	return errors.Join(errs...)
}

// policy is one session's rules, with the secrets it injects read at open.
type policy struct {
	agent  string
	rules  []api.EgressRule
	inject map[string]injection // by host
}

type injection struct {
	header, value string
}

func newPolicy(spec api.EgressSpec, lookup func(string) (string, bool)) (*policy, error) {
	if errs := spec.Validate("sandbox.egress"); len(errs) > 0 {
		return nil, fmt.Errorf("egress of agent %s: %w", orUnnamed(spec.Agent), errors.Join(errs...))
	}
	pol := &policy{agent: orUnnamed(spec.Agent), inject: map[string]injection{}}
	for _, a := range spec.Allow {
		r, _ := api.ParseEgressRule(a) // valid: Validate read it
		pol.rules = append(pol.rules, r)
	}
	if err := checkSecrets("agents["+pol.agent+"].sandbox.egress", spec, lookup); err != nil {
		return nil, err
	}
	for _, in := range spec.Inject {
		v, _ := lookup(in.ValueEnv)
		pol.inject[normHost(in.Host)] = injection{header: http.CanonicalHeaderKey(strings.TrimSpace(in.Header)), value: api.EgressHeaderValue(in, v)}
	}
	return pol, nil
}

func orUnnamed(agent string) string {
	if agent == "" {
		return "(unnamed)"
	}
	return agent
}

// normHost is host as rules compare it: lower case, no brackets, no trailing dot, an
// address in its canonical form.
func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(strings.TrimSpace(h), "[]"), "."))
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// rule is the first rule that admits host:port.
func (pol *policy) rule(host string, port int) (api.EgressRule, bool) {
	for _, r := range pol.rules {
		if r.Admits(host, port) {
			return r, true
		}
	}
	return api.EgressRule{}, false
}

// dialTarget decides whether host:port may be reached and where to: the address that was
// checked, so a name is never resolved twice (no rebinding between check and dial). The
// reason is what a refused command reads.
func (s *Session) dialTarget(ctx context.Context, host string, port int) (addr string, reason string) {
	r, ok := s.pol.rule(host, port)
	if !ok {
		return "", fmt.Sprintf("egress to %s is not allowed for agent %s", net.JoinHostPort(host, fmt.Sprint(port)), s.pol.agent)
	}
	if ip := net.ParseIP(host); ip != nil {
		if why := guard(ip, r.IP != nil); why != "" {
			return "", host + " is " + why
		}
		return net.JoinHostPort(ip.String(), fmt.Sprint(port)), ""
	}
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.DialTimeout)
	defer cancel()
	ips, err := s.p.opts.Resolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Sprintf("%s does not resolve", host)
	}
	var why string
	for _, ip := range ips {
		// A name is never an exact address: a private answer is refused whatever the
		// rules say (a name an attacker controls could point anywhere).
		if why = guard(ip.IP, false); why == "" {
			return net.JoinHostPort(ip.IP.String(), fmt.Sprint(port)), ""
		}
	}
	return "", fmt.Sprintf("%s resolves to %s (%s)", host, why, ips[0].IP)
}

// guard is why the SSRF guard refuses ip, or "": a link-local or metadata address always,
// a loopback, private or reserved one unless exact (an allow entry names that address).
func guard(ip net.IP, exact bool) string {
	switch {
	case netguard.Metadata(ip):
		return "a link-local or cloud metadata address, never reached"
	case !exact && !netguard.Public(ip):
		return "a private address"
	}
	return ""
}
