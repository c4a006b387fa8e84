package gateway

import (
	"github.com/nexo-temporal/nexo/api"

	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// How a request is authenticated, in order (auth.go's guard):
//
//  1. An open gateway (no tokens) serves loopback only; it answers only requests whose
//     Host is localhost or a loopback IP, so a web page cannot reach it through a DNS
//     name rebound to 127.0.0.1. Every request then acts as "local" with every scope.
//  2. Unsafe methods (POST) are refused when a browser says they come from another
//     origin (Sec-Fetch-Site, else Origin against Host: net/http's CrossOriginProtection).
//     Non-browser clients send neither header and pass. The codec routes (codec.go) also
//     admit the Temporal Web UI origins of gateway.codec_origins, and only those.
//  3. "Authorization: Bearer <secret>" names a token; a wrong or unknown one is 401.
//  4. Otherwise the page's session cookie (HttpOnly, SameSite=Lax) names a token, set by
//     the login form. Unsafe requests on a cookie must also carry the session's CSRF
//     token (header X-Nexo-CSRF, or form field csrf for the logout form): the cookie is
//     ambient, the token is not.
//  5. The route's scope must be among the token's (403 otherwise). The MCP server's
//     route needs a token of any scope, and each tool call the tool's scope (mcp.go).

// Names of the session cookie, the CSRF header and form field.
const (
	sessionCookie = "nexo_session"
	csrfHeader    = "X-Nexo-CSRF"
	csrfField     = "csrf"
	// openPrincipal is who decides on an open gateway when the request names nobody.
	openPrincipal = "local"
)

// principal is who a request acts as.
type principal struct {
	// name of the token, or openPrincipal.
	name   string
	scopes []string
	// limits are the token's (limits.go); the zero value admits every run.
	limits Limits
	open   bool
	// session is set when the request was authenticated by the page's cookie.
	session *session
}

func (p *principal) has(scope string) bool {
	return p != nil && (p.open || slices.Contains(p.scopes, scope))
}

// decider is what a decision records as its author: the token's name (never its secret),
// with the person it acts for when the request names one.
func (p *principal) decider(by string) string {
	by = strings.TrimSpace(by)
	switch {
	case p == nil:
		return ""
	case p.open && by != "":
		return by
	case p.open:
		return openPrincipal
	case by != "" && by != p.name:
		return fmt.Sprintf("%s (%s)", p.name, by)
	}
	return p.name
}

type principalKey struct{}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

func validScope(s string) bool { return slices.Contains(api.Scopes, s) }

// guard wraps a route with the checks above and the body limit.
func (s *Server) guard(rt route) http.Handler {
	h := http.Handler(rt.handle)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny := func(status int, detail string) {
			if rt.page {
				s.pageError(w, r, status, detail)
				return
			}
			problem(w, r, status, detail)
		}
		if s.Open() && !loopbackHost(r.Host) {
			deny(http.StatusForbidden, fmt.Sprintf("host %q is not localhost or a loopback IP; an open gateway (no gateway.tokens) answers only requests addressed to this machine", r.Host))
			return
		}
		maxBody := s.maxBody
		if rt.codec {
			// The Web UI calls from its own origin, which CodecOrigins lists.
			if err := s.codecCross.Check(r); err != nil {
				deny(http.StatusForbidden, codecOriginRefused(r))
				return
			}
			maxBody = max(maxBody, codecMaxBody)
		} else if err := s.crossOrigin.Check(r); err != nil {
			deny(http.StatusForbidden, "cross-origin request refused: this endpoint changes state and accepts requests from the gateway's own pages or from non-browser clients only")
			return
		}
		// Before anything reads the body: the CSRF check parses a form.
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		p, status, detail := s.authenticate(r)
		if status == 0 && p != nil && p.session != nil && unsafeMethod(r.Method) && !rt.csrfExempt && !p.session.csrfOK(r) {
			status, detail = http.StatusForbidden, "missing or wrong CSRF token (header "+csrfHeader+"); reload the page and try again"
		}
		switch {
		case status == http.StatusUnauthorized && rt.scope == "" && !rt.perCall:
			p = nil // public routes serve anyone; a bad token does not matter there
		case status == http.StatusUnauthorized && rt.page && r.Method == http.MethodGet:
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case status == http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="nexo"`)
			deny(status, detail)
			return
		case status != 0:
			deny(status, detail)
			return
		}
		if rt.scope != "" && !p.has(rt.scope) {
			deny(http.StatusForbidden, fmt.Sprintf("token %s lacks scope %s (it has: %s)", p.name, rt.scope, strings.Join(p.scopes, ", ")))
			return
		}
		if rt.codec && rt.scope != "" && !p.limits.Unlimited() {
			// A stored payload names no run, so whose it is cannot be checked: the codec
			// endpoint serves unlimited tokens only.
			deny(http.StatusForbidden, fmt.Sprintf("token %s is limited to %s; the codec endpoint serves unlimited tokens only (a stored payload names no run whose agent could be checked)", p.name, p.limits))
			return
		}
		if p != nil {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		h.ServeHTTP(w, r)
	})
}

// authenticate returns who the request acts as, or an HTTP status and why not.
func (s *Server) authenticate(r *http.Request) (*principal, int, string) {
	if s.Open() {
		return &principal{name: openPrincipal, open: true, scopes: api.Scopes}, 0, ""
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, secret, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			return nil, http.StatusUnauthorized, "Authorization must be \"Bearer <token>\""
		}
		t, ok := s.tokenFor(strings.TrimSpace(secret))
		if !ok {
			return nil, http.StatusUnauthorized, "unknown token"
		}
		return &principal{name: t.Name, scopes: t.Scopes, limits: t.limits()}, 0, ""
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.sessions.get(c.Value); ok {
			return &principal{name: sess.name, scopes: sess.scopes, limits: sess.limits, session: sess}, 0, ""
		}
		return nil, http.StatusUnauthorized, "your session has expired; log in again"
	}
	return nil, http.StatusUnauthorized, "this gateway needs a token: send \"Authorization: Bearer <token>\""
}

// tokenFor finds the token with this secret. Comparing digests in constant time leaks
// neither a secret's bytes nor its length through timing.
func (s *Server) tokenFor(secret string) (Token, bool) {
	got := sha256.Sum256([]byte(secret))
	var found Token
	ok := false
	for _, t := range s.tokens {
		want := sha256.Sum256([]byte(t.Secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			found, ok = t, true
		}
	}
	return found, ok
}

func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// loopbackHost reports whether a Host header names this machine: localhost (or a name
// under .localhost, which resolves to loopback by RFC 6761) or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	lower := strings.ToLower(host)
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// session is one page login: a random id in the cookie, the token it was opened with
// (its name and scopes, never its secret) and a CSRF token the page sends back.
type session struct {
	id, csrf string
	name     string
	scopes   []string
	limits   Limits
	expires  time.Time
}

func (s *session) csrfOK(r *http.Request) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// sessions lives in memory: a restart logs everyone out, which is fine for a page whose
// logins cost one paste of a token.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
}

// maxSessions bounds memory; the oldest logins go first.
const maxSessions = 10000

func newSessions(ttl time.Duration) *sessions {
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	return &sessions{m: map[string]*session{}, ttl: ttl}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(t Token) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := time.Now()
	for id, s := range ss.m {
		if now.After(s.expires) {
			delete(ss.m, id)
		}
	}
	for len(ss.m) >= maxSessions {
		var oldest *session
		for _, s := range ss.m {
			if oldest == nil || s.expires.Before(oldest.expires) {
				oldest = s
			}
		}
		delete(ss.m, oldest.id)
	}
	s := &session{id: randomToken(), csrf: randomToken(), name: t.Name, scopes: t.Scopes, limits: t.limits(), expires: now.Add(ss.ttl)}
	ss.m[s.id] = s
	return s
}

func (ss *sessions) get(id string) (*session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok || time.Now().After(s.expires) {
		delete(ss.m, id)
		return nil, false
	}
	return s, true
}

func (ss *sessions) delete(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

func sessionCookieFor(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil}
}
