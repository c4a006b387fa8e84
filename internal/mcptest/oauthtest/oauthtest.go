// Package oauthtest is an OAuth 2.1 authorization server and an MCP server it protects,
// in one test HTTP server: the authorization endpoint approves every request at once
// (it stands for the user clicking "allow"), the token endpoint checks PKCE (S256), the
// client and the redirect URI, issues short-lived access tokens and rotates refresh
// tokens (a used or revoked one is invalid_grant), and the MCP server (mcptest's tools
// over streamable HTTP) answers 401 to a request without a live access token.
package oauthtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/nexo-temporal/nexo/internal/mcptest"
)

// Options shape the server.
type Options struct {
	// ClientID is the one client registered (default "nexo-test").
	ClientID string
	// ClientSecret, when set, is required at the token endpoint (a confidential client).
	ClientSecret string
	// AccessTTL is the access tokens' lifetime (default 1s).
	AccessTTL time.Duration
}

// Server is the authorization server (its issuer is URL) and the MCP server at MCPURL.
type Server struct {
	URL    string
	MCPURL string
	opts   Options

	mu       sync.Mutex
	codes    map[string]grant
	access   map[string]time.Time // token → expiry
	refresh  map[string]bool      // token → still valid
	used     []string             // every Authorization header the MCP server saw
	refreshN int
	issued   []string // every token issued, access and refresh
}

type grant struct {
	client, redirect, challenge string
}

// Start serves until the test ends.
func Start(t testing.TB, o Options) *Server {
	if o.ClientID == "" {
		o.ClientID = "nexo-test"
	}
	if o.AccessTTL <= 0 {
		o.AccessTTL = time.Second
	}
	s := &Server{opts: o, codes: map[string]grant{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	s.MCPURL = ts.URL + "/mcp"
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": s.MCPURL, "authorization_servers": []string{s.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": s.URL, "authorization_endpoint": s.URL + "/authorize",
			"token_endpoint": s.URL + "/token", "response_types_supported": []string{"code"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post", "client_secret_basic"}})
	})
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	mux.Handle("/mcp", s.guard(server.NewStreamableHTTPServer(mcptest.NewServer(mcptest.Options{}))))
	return s
}

// authorize approves at once: it redirects to the redirect URI with a code bound to the
// client, the redirect URI and the PKCE challenge.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("client_id") != s.opts.ClientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case err != nil || redirect.Scheme != "http" || redirect.Hostname() != "127.0.0.1":
		http.Error(w, "redirect_uri must be a loopback URL", http.StatusBadRequest)
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		http.Error(w, "PKCE (S256) is required", http.StatusBadRequest)
		return
	}
	code := random()
	s.mu.Lock()
	s.codes[code] = grant{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge")}
	s.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	client, secret, basic := r.BasicAuth()
	if !basic {
		client, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if client != s.opts.ClientID || secret != s.opts.ClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || g.client != client:
			oauthError(w, "invalid_grant", "unknown or used code")
			return
		case g.redirect != r.PostForm.Get("redirect_uri"):
			oauthError(w, "invalid_grant", "redirect_uri differs from the authorization request's")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			oauthError(w, "invalid_grant", "PKCE verification failed")
			return
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !s.refresh[rt] {
			oauthError(w, "invalid_grant", "refresh token revoked or used")
			return
		}
		s.refresh[rt] = false // rotation: each refresh token is good once
		s.refreshN++
	default:
		oauthError(w, "unsupported_grant_type", r.PostForm.Get("grant_type"))
		return
	}
	at, rt := "at-"+random(), "rt-"+random()
	s.access[at] = time.Now().Add(s.opts.AccessTTL)
	s.refresh[rt] = true
	s.issued = append(s.issued, at, rt)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt,
		"expires_in": int(s.opts.AccessTTL.Round(time.Second) / time.Second)})
}

func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		s.mu.Lock()
		s.used = append(s.used, h)
		exp, ok := s.access[strings.TrimPrefix(h, "Bearer ")]
		s.mu.Unlock()
		if !strings.HasPrefix(h, "Bearer ") || !ok || time.Now().After(exp) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "invalid or expired token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RevokeRefreshTokens makes every refresh token issued so far invalid (the user revoked
// the grant).
func (s *Server) RevokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.refresh {
		s.refresh[k] = false
	}
}

// Refreshes counts the refresh grants the token endpoint honoured.
func (s *Server) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshN
}

// Issued returns every access and refresh token issued, in order.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// AuthHeaders returns the Authorization header of every request the MCP server saw.
func (s *Server) AuthHeaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.used...)
}

func oauthError(w http.ResponseWriter, code, desc string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Buffer is an io.Writer a login prints to while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var authURL = regexp.MustCompile(`(?m)^\s+(http://\S+/authorize\?\S+)\s*$`)

// Approve waits for a login to print this server's authorization URL in out and opens it
// as a browser would: the server approves at once and redirects to the login's loopback
// listener, whose answer must be 200.
func Approve(t testing.TB, out fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := authURL.FindStringSubmatch(out.String()); m != nil {
			resp, err := http.Get(m[1])
			if err != nil {
				t.Fatalf("open the authorization URL: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the redirect answered %s", resp.Status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no authorization URL printed; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
