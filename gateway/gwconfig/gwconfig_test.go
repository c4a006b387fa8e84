package gwconfig_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/gateway"
	"github.com/nexo-temporal/nexo/gateway/gwconfig"
)

// noRuns is a gateway.Runs none of these requests reach (auth and the codec answer
// before any run is read); a call would panic on the nil interface.
type noRuns struct{ gateway.Runs }

const ciSecret = "0123456789abcdef-ci"

// openStore opens cfg's artifact store for the test, as a binary does before Server.
func openStore(t *testing.T, cfg config.Config) artifacts.Store {
	t.Helper()
	st, err := artifacts.Open(cfg.Artifacts.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestServerReadsTokenSecrets: a configured token whose secret variable is unset stops
// the gateway with the field named; once set, the gateway is no longer open and admits
// that secret only.
func TestServerReadsTokenSecrets(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Artifacts.URL = t.TempDir()
	cfg.Gateway.Tokens = []config.GatewayToken{{Name: "ci", TokenEnv: "NEXO_TEST_CI_TOKEN", Scopes: []string{"read"}}}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, err := gwconfig.Server(cfg, noRuns{}, openStore(t, cfg), getenv, nil); err == nil || !strings.Contains(err.Error(), "gateway.tokens[ci].token_env: environment variable NEXO_TEST_CI_TOKEN is empty or unset") {
		t.Errorf("Server with the variable unset = %v", err)
	}
	env["NEXO_TEST_CI_TOKEN"] = ciSecret
	s, err := gwconfig.Server(cfg, noRuns{}, openStore(t, cfg), getenv, nil)
	if err != nil {
		t.Fatalf("Server = %v", err)
	}
	if s.Open() || s.AuthSummary() != "bearer tokens ci (read)" {
		t.Errorf("open %v, auth %q; want bearer tokens ci (read)", s.Open(), s.AuthSummary())
	}
	req := httptest.NewRequest("GET", "/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer not-the-secret-of-ci")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /v1/runs with a wrong bearer: status %d, want 401", rec.Code)
	}
}

// TestServerKeepsTokenLimits: a token's agents and workflows reach the gateway, which
// names them at start and enforces them (a limited token may not use /codec).
func TestServerKeepsTokenLimits(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Artifacts.URL = t.TempDir()
	cfg.Gateway.Tokens = []config.GatewayToken{{Name: "team", TokenEnv: "T", Scopes: []string{"read"}, Agents: []string{"support-*"}, Workflows: []string{"AgentRun"}}}
	s, err := gwconfig.Server(cfg, noRuns{}, openStore(t, cfg), func(string) string { return ciSecret }, nil)
	if err != nil {
		t.Fatalf("Server = %v", err)
	}
	if want := "bearer tokens team (read; agents support-*; workflows AgentRun)"; s.AuthSummary() != want {
		t.Errorf("auth %q, want %q", s.AuthSummary(), want)
	}
	req := httptest.NewRequest("POST", "/codec/decode", strings.NewReader(`{"payloads":[]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ciSecret)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "unlimited tokens only") {
		t.Errorf("limited token on /codec/decode: status %d %s, want 403", rec.Code, rec.Body.String())
	}
}

// TestServerServesCodec: the binaries' gateway gets the codec over artifacts.url and the
// configured origins.
func TestServerServesCodec(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Artifacts.URL = t.TempDir()
	cfg.Gateway.CodecOrigins = []string{"https://ui.example.com"}
	s, err := gwconfig.Server(cfg, noRuns{}, openStore(t, cfg), func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("OPTIONS", "http://127.0.0.1:8234/codec/decode", nil)
	req.Header.Set("Origin", "https://ui.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "https://ui.example.com" {
		t.Errorf("preflight from a configured origin: status %d, Allow-Origin %q", rec.Code, rec.Header().Get("Access-Control-Allow-Origin"))
	}
	req = httptest.NewRequest("POST", "http://127.0.0.1:8234/codec/decode", strings.NewReader(`{"payloads":[]}`))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("POST /codec/decode: status %d, body %q; want 200", rec.Code, rec.Body.String())
	}
}
