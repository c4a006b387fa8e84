package activities_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/internal/mcptest/oauthtest"
	"github.com/nexo-temporal/nexo/mcpauth"
)

// oauthLogin runs the login flow against as, approving it as a browser would.
func oauthLogin(t *testing.T, file string, spec api.MCPServerSpec) mcpauth.Entry {
	t.Helper()
	var out oauthtest.Buffer
	done := make(chan error, 1)
	var e mcpauth.Entry
	go func() {
		var err error
		e, err = mcpauth.Login(context.Background(), mcpauth.File{Path: file}, spec, mcpauth.LoginOptions{Out: &out})
		done <- err
	}()
	oauthtest.Approve(t, &out)
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, out.String())
	}
	return e
}

// A server declared with oauth: before login, listing and calling fail (not retried)
// naming the login command; after it, calls carry the access token; once that expires
// the worker refreshes it and writes the rotated pair back; a revoked grant is the same
// clear error. No token or secret reaches a result, an error or a log line.
func TestMCPOAuthLoginRefreshAndRevoke(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{api.MCPHTTP} {
		t.Run(tr, func(t *testing.T) {
			as := oauthtest.Start(t, oauthtest.Options{AccessTTL: time.Second})
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			t.Cleanup(func() { slog.SetDefault(prev) })

			creds := filepath.Join(t.TempDir(), "creds.json")
			spec := api.MCPServerSpec{Name: "docs", Transport: tr, URL: as.MCPURL, OAuth: &api.MCPOAuth{ClientID: "nexo-test", Scopes: []string{"read"}}}
			a := activities.New(activities.Deps{MCPCredentialsFile: creds,
				Agents: []agents.Spec{{Name: "reader", MCP: []api.MCPServerSpec{spec}}}})
			t.Cleanup(func() { _ = a.Close() })
			var seen []string // everything the activities returned

			list := listMCP(t, a, "run-o1", spec)
			hint := "run: starter mcp login reader docs"
			if e := list.Errors["docs"]; !strings.Contains(e, "not logged in") || !strings.Contains(e, hint) {
				t.Fatalf("list before login: errors %v, want %q", list.Errors, hint)
			}
			_, err := callMCP(t, a, "run-o1", spec, "echo", `{"text":"hi"}`)
			if app := appError(t, err); !app.NonRetryable() || !strings.Contains(app.Error(), hint) {
				t.Fatalf("call before login = %v (non-retryable %v), want it to name %q", app, app.NonRetryable(), hint)
			}
			seen = append(seen, list.Errors["docs"], err.Error())

			first := oauthLogin(t, creds, spec)
			list = listMCP(t, a, "run-o2", spec)
			if len(list.Errors) != 0 || len(list.Tools) == 0 {
				t.Fatalf("list after login: %+v", list)
			}
			if got := mustCallMCP(t, a, "run-o2", spec, "echo", `{"text":"one"}`); got != "one" {
				t.Errorf("echo = %q", got)
			}
			// A server echoing the token back does not get it into the result.
			if got := mustCallMCP(t, a, "run-o2", spec, "echo", `{"text":"`+first.AccessToken+`"}`); got != "[REDACTED]" {
				t.Errorf("echo of the token = %q, want it redacted", got)
			}

			time.Sleep(time.Until(first.ExpiresAt))
			if got := mustCallMCP(t, a, "run-o2", spec, "echo", `{"text":"two"}`); got != "two" {
				t.Errorf("echo after expiry = %q", got)
			}
			if as.Refreshes() == 0 {
				t.Error("no refresh after the access token expired")
			}
			stored, _, err := (mcpauth.File{Path: creds}).Get(context.Background(), mcpauth.Key(spec.URL, "nexo-test"))
			if err != nil || stored.AccessToken == first.AccessToken || stored.RefreshToken == first.RefreshToken {
				t.Errorf("credential file after refresh holds the login's tokens (%v)", err)
			}

			as.RevokeRefreshTokens()
			time.Sleep(time.Until(stored.ExpiresAt))
			_, err = callMCP(t, a, "run-o2", spec, "echo", `{"text":"three"}`)
			if app := appError(t, err); !app.NonRetryable() || !strings.Contains(app.Error(), "refused the refresh token") || !strings.Contains(app.Error(), hint) {
				t.Errorf("call after revocation = %v (non-retryable %v), want the refusal and %q", app, app.NonRetryable(), hint)
			}
			seen = append(seen, err.Error())
			list = listMCP(t, a, "run-o3", spec)
			if e := list.Errors["docs"]; !strings.Contains(e, hint) {
				t.Errorf("list after revocation: %v", list.Errors)
			}
			seen = append(seen, list.Errors["docs"])

			if err := a.MCP.CloseMCP(context.Background(), api.CloseMCPRequest{RunID: "run-o2"}); err != nil {
				t.Errorf("CloseMCP: %v", err)
			}
			// Every request (the session's closing DELETE too) carried an access token.
			for i, h := range as.AuthHeaders() {
				if !strings.HasPrefix(h, "Bearer at-") {
					t.Errorf("request %d reached the server with Authorization %q", i, h)
				}
			}
			all := strings.Join(seen, "\n") + logs.String()
			for _, tok := range as.Issued() {
				if strings.Contains(all, tok) {
					t.Errorf("token %s… leaked into a result, an error or a log line", tok[:6])
				}
			}
			if st, err := os.Stat(creds); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("credential file: %v, %v", st, err)
			}
		})
	}
}
