package mcpauth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest/oauthtest"
)

func oauthSpec(as *oauthtest.Server, clientID string) api.MCPServerSpec {
	return api.MCPServerSpec{Name: "docs", Transport: api.MCPHTTP, URL: as.MCPURL, OAuth: &api.MCPOAuth{ClientID: clientID, Scopes: []string{"read"}}}
}

func login(t *testing.T, f File, spec api.MCPServerSpec, o LoginOptions) (Entry, string) {
	t.Helper()
	var out oauthtest.Buffer
	o.Out = &out
	done := make(chan error, 1)
	var e Entry
	go func() {
		var err error
		e, err = Login(context.Background(), f, spec, o)
		done <- err
	}()
	oauthtest.Approve(t, &out)
	if err := <-done; err != nil {
		t.Fatalf("Login: %v\noutput:\n%s", err, out.String())
	}
	return e, out.String()
}

func TestLoginStoresTokensInA0600File(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: time.Hour})
	f := File{Path: filepath.Join(t.TempDir(), "sub", "creds.json")}
	spec := oauthSpec(as, "nexo-test")
	e, out := login(t, f, spec, LoginOptions{})
	issued := as.Issued()
	if len(issued) != 2 || e.AccessToken != issued[0] || e.RefreshToken != issued[1] {
		t.Fatalf("entry = %+v, issued %v", e, issued)
	}
	for _, tok := range issued {
		if strings.Contains(out, tok) {
			t.Errorf("login printed a token:\n%s", out)
		}
	}
	st, err := os.Stat(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credential file mode = %v, want 0600", st.Mode().Perm())
	}
	got, ok, err := f.Get(context.Background(), Key(spec.URL, "nexo-test"))
	if err != nil || !ok || got.AccessToken != issued[0] || got.RefreshToken != issued[1] || time.Until(got.ExpiresAt) < 50*time.Minute {
		t.Errorf("stored = %+v, %v, %v", got, ok, err)
	}
	if had, err := Logout(context.Background(), f, spec); !had || err != nil {
		t.Errorf("Logout = %v, %v", had, err)
	}
	if _, ok, _ := f.Get(context.Background(), Key(spec.URL, "nexo-test")); ok {
		t.Error("the entry is still there after Logout")
	}
}

func TestLoginWithAConfidentialClientAndAnIssuer(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{ClientID: "conf", ClientSecret: "s3cret-client", AccessTTL: time.Hour})
	f := File{Path: filepath.Join(t.TempDir(), "creds.json")}
	spec := oauthSpec(as, "conf")
	spec.OAuth.AuthorizationServer = as.URL
	spec.OAuth.ClientSecretEnv = "DOCS_SECRET"
	if _, err := Login(context.Background(), f, spec, LoginOptions{Lookup: func(string) (string, bool) { return "", false }}); !errors.Is(err, ErrClientSecret) {
		t.Fatalf("Login without the secret's variable = %v, want ErrClientSecret", err)
	}
	lookup := func(k string) (string, bool) { return "s3cret-client", k == "DOCS_SECRET" }
	login(t, f, spec, LoginOptions{Lookup: lookup})
	b, _ := os.ReadFile(f.Path)
	if strings.Contains(string(b), "s3cret-client") {
		t.Error("the client secret was written to the credential file")
	}
}

func TestLoginTimesOutWithAClearMessage(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{})
	_, err := Login(context.Background(), File{Path: filepath.Join(t.TempDir(), "c.json")}, oauthSpec(as, "nexo-test"), LoginOptions{Timeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no redirect to http://127.0.0.1:") || !strings.Contains(err.Error(), "--timeout") {
		t.Errorf("Login = %v", err)
	}
}

// A token that is due is refreshed by GetToken and the rotated pair written back; a
// second store (another client or worker) sees the new pair and does not refresh again;
// a revoked refresh token is ErrLogin.
func TestStoreRefreshesUnderTheLock(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: time.Second})
	f := File{Path: filepath.Join(t.TempDir(), "creds.json")}
	spec := oauthSpec(as, "nexo-test")
	first, _ := login(t, f, spec, LoginOptions{})
	cfg, err := Config(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stores := []*Store{NewStore(f, spec, cfg), NewStore(f, spec, cfg), NewStore(f, spec, cfg)}
	tok, err := stores[0].GetToken(ctx)
	if err != nil || tok.AccessToken != first.AccessToken {
		t.Fatalf("GetToken before expiry = %v, %v", tok, err)
	}
	time.Sleep(time.Until(first.ExpiresAt))
	var wg sync.WaitGroup
	toks := make([]*transport.Token, len(stores))
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { toks[i], errs[i] = s.GetToken(ctx) })
	}
	wg.Wait()
	for i := range stores {
		if errs[i] != nil {
			t.Fatalf("store %d after expiry: %v", i, errs[i])
		}
	}
	for i := range stores {
		if toks[i].AccessToken == first.AccessToken || toks[i].AccessToken != toks[0].AccessToken {
			t.Errorf("store %d after expiry: %v, %v (first %q)", i, toks[i], errs[i], first.AccessToken)
		}
	}
	if n := as.Refreshes(); n != 1 {
		t.Errorf("refreshes = %d, want 1 (one rotation shared by every store)", n)
	}
	stored, _, _ := f.Get(ctx, Key(spec.URL, "nexo-test"))
	if stored.AccessToken != toks[0].AccessToken || stored.RefreshToken == first.RefreshToken || stored.RefreshToken == "" {
		t.Errorf("file after refresh = %+v, want the rotated pair", stored)
	}
	if s := stores[0].Secrets(); len(s) != 4 {
		t.Errorf("Secrets() = %d values, want the old and new tokens", len(s))
	}

	as.RevokeRefreshTokens()
	time.Sleep(time.Until(stored.ExpiresAt))
	if _, err := stores[2].GetToken(ctx); !errors.Is(err, ErrLogin) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("GetToken with a revoked refresh token = %v, want ErrLogin naming invalid_grant", err)
	}
	if _, err := NewStore(File{Path: filepath.Join(t.TempDir(), "none.json")}, spec, cfg).GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
		t.Errorf("GetToken with nothing stored = %v, want ErrNoToken", err)
	}
}

func TestDueRefreshesAhead(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		e    Entry
		want bool
	}{
		{Entry{}, false},
		{Entry{ExpiresAt: now.Add(time.Hour), Lifetime: time.Hour}, false},
		{Entry{ExpiresAt: now.Add(20 * time.Second), Lifetime: time.Hour}, true},
		{Entry{ExpiresAt: now.Add(500 * time.Millisecond), Lifetime: time.Second}, false},
		{Entry{ExpiresAt: now.Add(50 * time.Millisecond), Lifetime: time.Second}, true},
		{Entry{ExpiresAt: now.Add(-time.Second)}, true},
	} {
		if got := due(tc.e, now); got != tc.want {
			t.Errorf("due(%v ahead, lifetime %v) = %v, want %v", tc.e.ExpiresAt.Sub(now), tc.e.Lifetime, got, tc.want)
		}
	}
}

func TestMetadataURLInsertsTheWellKnownPath(t *testing.T) {
	for in, want := range map[string]string{
		"https://auth.example.com":         "https://auth.example.com/.well-known/oauth-authorization-server",
		"https://auth.example.com/":        "https://auth.example.com/.well-known/oauth-authorization-server",
		"https://auth.example.com/tenant1": "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
	} {
		if got, err := metadataURL(in); err != nil || got != want {
			t.Errorf("metadataURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
