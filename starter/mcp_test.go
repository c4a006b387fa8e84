package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/internal/mcptest/oauthtest"
	"github.com/nexo-temporal/nexo/mcpauth"
)

// `starter mcp login` prints the URL to open, takes the redirect, stores the tokens in a
// 0600 file and prints none of them; `mcp status` tells when the token expires;
// `mcp logout` removes it.
func TestMCPLoginStatusLogout(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: time.Hour})
	dir := t.TempDir()
	t.Chdir(dir)
	creds := filepath.Join(dir, "state", "creds.json")
	cfg := `llm: {base_url: http://127.0.0.1:1/v1, model: m}
mcp: {credentials_file: ` + creds + `}
agents:
  - name: reader
    instructions: x
    mcp:
      - name: docs
        transport: http
        url: ` + as.MCPURL + `
        oauth: {client_id: nexo-test, scopes: [read]}
      - name: plain
        transport: http
        url: ` + as.MCPURL + `
`
	if err := os.WriteFile(filepath.Join(dir, "nexo.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	starter := func(args ...string) (string, string, int) {
		var out oauthtest.Buffer
		var errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		return out.String(), errOut.String(), code
	}

	if out, _, code := starter("mcp", "status"); code != 0 || !strings.Contains(out, "not logged in (run: starter mcp login reader docs)") || strings.Contains(out, "plain") {
		t.Errorf("status before login (exit %d):\n%s", code, out)
	}
	if _, errOut, code := starter("mcp", "login", "reader", "plain"); code != 1 || !strings.Contains(errOut, "not declared with oauth") {
		t.Errorf("login to a server without oauth: exit %d, %s", code, errOut)
	}

	var out oauthtest.Buffer
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "login", "reader", "docs", "--timeout", "30s"}, &out, &errOut)
	}()
	oauthtest.Approve(t, &out)
	if code := <-done; code != 0 {
		t.Fatalf("login: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "logged in to docs") || !strings.Contains(out.String(), "access token expires") {
		t.Errorf("login output:\n%s", out.String())
	}
	st, err := os.Stat(creds)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v, %v", st, err)
	}
	statusOut, _, code := starter("mcp", "status", "--json")
	var list []mcpServerStatus
	if err := json.Unmarshal([]byte(statusOut), &list); err != nil || code != 0 || len(list) != 1 || !list[0].LoggedIn || !list[0].Refresh ||
		list[0].ExpiresAt == nil || time.Until(*list[0].ExpiresAt) < 50*time.Minute {
		t.Errorf("status --json (exit %d, %v):\n%s", code, err, statusOut)
	}
	printed := out.String() + errOut.String() + statusOut
	for _, tok := range as.Issued() {
		if strings.Contains(printed, tok) {
			t.Errorf("the starter printed token %s…", tok[:6])
		}
	}
	if e, ok, _ := (mcpauth.File{Path: creds}).Get(context.Background(), mcpauth.Key(as.MCPURL, "nexo-test")); !ok || e.AccessToken != as.Issued()[0] {
		t.Errorf("stored entry = %+v, %v", e, ok)
	}

	// A file others may read is refused, like ssh's private keys (hardening round two, item 6).
	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := starter("mcp", "status"); code != 1 || !strings.Contains(errOut, "mode 0644 lets other users read or change its tokens") {
		t.Errorf("status of a 0644 credential file: exit %d, want 1 and the refusal\n%s", code, errOut)
	}
	if err := os.Chmod(creds, 0o600); err != nil {
		t.Fatal(err)
	}

	if out, _, code := starter("mcp", "logout", "reader", "docs"); code != 0 || !strings.Contains(out, "logged out of docs") {
		t.Errorf("logout (exit %d): %s", code, out)
	}
	if out, _, _ := starter("mcp", "status"); !strings.Contains(out, "not logged in") {
		t.Errorf("status after logout:\n%s", out)
	}
}
