package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexo-temporal/nexo/api"
)

var (
	// ErrLogin: there is no usable token for the server (none stored, or the
	// authorization server refused the refresh token); only a new login helps.
	ErrLogin = errors.New("not logged in")
	// ErrClientSecret: the variable client_secret_env names is not set.
	ErrClientSecret = errors.New("client secret variable not set")
)

// refreshAhead bounds how long before its expiry an access token is refreshed, so that
// it does not expire between the read and the server's check; a short-lived token is
// refreshed a tenth of its lifetime ahead.
const refreshAhead = 30 * time.Second

// httpTimeout bounds one request to the authorization server.
const httpTimeout = 30 * time.Second

// Config is mcp-go's OAuth configuration for a server declaration: its client, scopes,
// PKCE, the authorization server's metadata when the declaration names its issuer (else
// it is discovered from the MCP server's protected-resource metadata), and the client
// secret read from the variable client_secret_env names. lookup nil means os.LookupEnv.
func Config(spec api.MCPServerSpec, lookup func(string) (string, bool)) (transport.OAuthConfig, error) {
	o := spec.OAuth
	if o == nil {
		return transport.OAuthConfig{}, fmt.Errorf("MCP server %s: no oauth declared", spec.Name)
	}
	cfg := transport.OAuthConfig{ClientID: o.ClientID, Scopes: o.Scopes, PKCEEnabled: true,
		HTTPClient: &http.Client{Timeout: httpTimeout}}
	if o.AuthorizationServer != "" {
		u, err := metadataURL(o.AuthorizationServer)
		if err != nil {
			return cfg, fmt.Errorf("MCP server %s: oauth.authorization_server: %w", spec.Name, err)
		}
		cfg.AuthServerMetadataURL = u
	}
	if o.ClientSecretEnv != "" {
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(o.ClientSecretEnv)
		if !ok || v == "" {
			return cfg, fmt.Errorf("MCP server %s: %w: oauth.client_secret_env names %s, which is not set (or is empty) here",
				spec.Name, ErrClientSecret, o.ClientSecretEnv)
		}
		cfg.ClientSecret = v
	}
	return cfg, nil
}

// metadataURL is the RFC 8414 metadata URL of an issuer: the well-known path inserted
// between its host and its path.
func metadataURL(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("%q is not an issuer URL", issuer)
	}
	u.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// Store is the transport.TokenStore of one server's client over the credential file.
// GetToken refreshes an access token that has expired (or is about to) while it holds
// the file's lock, and writes the rotated tokens back before anyone else reads them, so
// mcp-go's handler never sees an expired token and never refreshes on its own.
//
// Concurrency: safe for concurrent use; the file's lock serialises refreshes across the
// processes and clients of a machine.
type Store struct {
	file      File
	key       string
	server    string
	refresher *transport.OAuthHandler

	mu      sync.Mutex
	secrets []string // every token this store has read, and the client secret
}

// NewStore returns the token store of spec's server in file. cfg is what Config built;
// its HTTP client is the one refreshes use.
func NewStore(file File, spec api.MCPServerSpec, cfg transport.OAuthConfig) *Store {
	// The refresher has a store of its own: it only makes the refresh request, and this
	// Store writes the result into the file under the lock it already holds.
	cfg.TokenStore = transport.NewMemoryTokenStore()
	h := transport.NewOAuthHandler(cfg)
	h.SetBaseURL(spec.URL)
	s := &Store{file: file, key: Key(spec.URL, spec.OAuth.ClientID), server: spec.Name, refresher: h}
	if cfg.ClientSecret != "" {
		s.secrets = append(s.secrets, cfg.ClientSecret)
	}
	return s
}

// Secrets returns the tokens and client secret this store has seen, to be redacted from
// anything the client returns or logs.
func (s *Store) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.secrets...)
}

func (s *Store) remember(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range []string{e.AccessToken, e.RefreshToken} {
		if v != "" && !contains(s.secrets, v) {
			s.secrets = append(s.secrets, v)
		}
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// GetToken returns the stored access token, refreshed first when it is due. No entry is
// transport.ErrNoToken; a refresh the authorization server refuses is ErrLogin.
func (s *Store) GetToken(ctx context.Context) (*transport.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var tok *transport.Token
	err := s.file.locked(ctx, func() error {
		d, err := s.file.read()
		if err != nil {
			return err
		}
		e, ok := d.Servers[s.key]
		if !ok || e.AccessToken == "" {
			return transport.ErrNoToken
		}
		s.remember(e)
		if !due(e, time.Now()) {
			tok = e.token()
			return nil
		}
		if e.RefreshToken == "" {
			return fmt.Errorf("%w: the access token expired at %s and there is no refresh token", ErrLogin, e.ExpiresAt.Format(time.RFC3339))
		}
		fresh, err := s.refresher.RefreshToken(ctx, e.RefreshToken)
		if err != nil {
			var oe transport.OAuthError
			if errors.As(err, &oe) {
				return fmt.Errorf("%w: the authorization server refused the refresh token (%s)", ErrLogin, oe.ErrorCode)
			}
			return fmt.Errorf("refresh the access token: %w", err)
		}
		e = entryOf(e.URL, e.ClientID, fresh, time.Now())
		d.Servers[s.key] = e
		if err := s.file.write(d); err != nil {
			return err
		}
		s.remember(e)
		tok = e.token()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// SaveToken stores a token mcp-go obtained (only a login does; refreshes are GetToken's).
func (s *Store) SaveToken(ctx context.Context, t *transport.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	url, client, _ := strings.Cut(s.key, " ")
	e := entryOf(url, client, t, time.Now())
	s.remember(e)
	return s.file.Update(ctx, func(m map[string]Entry) error {
		m[s.key] = e
		return nil
	})
}

// due tells whether e's access token should be refreshed at now.
func due(e Entry, now time.Time) bool {
	if e.ExpiresAt.IsZero() {
		return false
	}
	ahead := refreshAhead
	if e.Lifetime > 0 {
		ahead = min(ahead, e.Lifetime/10)
	}
	return !now.Before(e.ExpiresAt.Add(-ahead))
}

func (e Entry) token() *transport.Token {
	return &transport.Token{AccessToken: e.AccessToken, TokenType: e.TokenType, RefreshToken: e.RefreshToken,
		Scope: e.Scope, ExpiresAt: e.ExpiresAt}
}

// entryOf is the entry for a token the authorization server issued at now.
func entryOf(url, clientID string, t *transport.Token, now time.Time) Entry {
	e := Entry{URL: url, ClientID: clientID, AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken,
		Scope: t.Scope, ExpiresAt: t.ExpiresAt, Updated: now.UTC()}
	if t.ExpiresIn > 0 {
		e.Lifetime = time.Duration(t.ExpiresIn) * time.Second
		if e.ExpiresAt.IsZero() {
			e.ExpiresAt = now.Add(e.Lifetime)
		}
	}
	if !e.ExpiresAt.IsZero() {
		e.ExpiresAt = e.ExpiresAt.UTC()
	}
	return e
}
