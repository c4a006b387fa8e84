package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/nexo-temporal/nexo/api"
)

// DefaultLoginTimeout is how long Login waits for the browser's redirect.
const DefaultLoginTimeout = 5 * time.Minute

// CallbackPath is the path of the loopback redirect URI.
const CallbackPath = "/callback"

// LoginOptions shape a login.
type LoginOptions struct {
	// Out receives the URL to open and what Login waits for.
	Out io.Writer
	// Timeout bounds the wait for the redirect (default DefaultLoginTimeout).
	Timeout time.Duration
	// Lookup reads the client secret's variable (nil: os.LookupEnv).
	Lookup func(string) (string, bool)
}

// Login authorizes Nexo for spec's server: the authorization code flow with PKCE (mcp-go's
// handler: discovery, authorization URL, code exchange) and a redirect to a loopback
// listener on 127.0.0.1 at a random port. It prints the URL to open, waits for the
// redirect, and stores the tokens in file. It opens no browser itself, so it works the
// same over SSH: open the URL in a browser on this machine.
func Login(ctx context.Context, file File, spec api.MCPServerSpec, o LoginOptions) (Entry, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultLoginTimeout
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	cfg, err := Config(spec, o.Lookup)
	if err != nil {
		return Entry{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: listen for the redirect: %w", spec.Name, err)
	}
	defer ln.Close()
	redirect := fmt.Sprintf("http://%s%s", ln.Addr(), CallbackPath)
	cfg.RedirectURI = redirect
	mem := transport.NewMemoryTokenStore()
	cfg.TokenStore = mem
	h := transport.NewOAuthHandler(cfg)
	h.SetBaseURL(spec.URL)

	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: %w", spec.Name, err)
	}
	state, err := transport.GenerateState()
	if err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: %w", spec.Name, err)
	}
	authURL, err := h.GetAuthorizationURL(ctx, state, transport.GenerateCodeChallenge(verifier))
	if err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: find its authorization server: %w", spec.Name, err)
	}

	type answer struct{ code, state, err string }
	answers := make(chan answer, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != CallbackPath {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		a := answer{code: q.Get("code"), state: q.Get("state"), err: q.Get("error")}
		if d := q.Get("error_description"); d != "" {
			a.err += ": " + d
		}
		if a.err == "" && a.code == "" {
			a.err = "the redirect carries no code"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if a.err != "" {
			fmt.Fprintf(w, "<p>Nexo: the authorization failed: %s</p>", html.EscapeString(a.err))
		} else {
			fmt.Fprint(w, "<p>Nexo: authorized. You can close this page.</p>")
		}
		select {
		case answers <- a:
		default: // a second redirect: the first one counts
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Fprintf(o.Out, "Open this URL in a browser on this machine to authorize Nexo for MCP server %s (%s):\n\n  %s\n\n", spec.Name, spec.URL, authURL)
	fmt.Fprintf(o.Out, "Waiting up to %s for the redirect to %s ...\n", o.Timeout, redirect)
	var a answer
	select {
	case a = <-answers:
	case <-time.After(o.Timeout):
		return Entry{}, fmt.Errorf("log in to MCP server %s: no redirect to %s within %s; open the URL above in a browser on this machine (the redirect goes to 127.0.0.1), or wait longer with --timeout",
			spec.Name, redirect, o.Timeout)
	case <-ctx.Done():
		return Entry{}, fmt.Errorf("log in to MCP server %s: %w", spec.Name, ctx.Err())
	}
	if a.err != "" {
		return Entry{}, fmt.Errorf("log in to MCP server %s: the authorization server answered: %s", spec.Name, a.err)
	}
	if err := h.ProcessAuthorizationResponse(ctx, a.code, a.state, verifier); err != nil {
		if errors.Is(err, transport.ErrInvalidState) {
			return Entry{}, fmt.Errorf("log in to MCP server %s: the redirect's state does not match this login (an old or forged redirect); run the login again", spec.Name)
		}
		return Entry{}, fmt.Errorf("log in to MCP server %s: exchange the code for tokens: %w", spec.Name, err)
	}
	tok, err := mem.GetToken(ctx)
	if err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: %w", spec.Name, err)
	}
	key := Key(spec.URL, spec.OAuth.ClientID)
	e := entryOf(spec.URL, spec.OAuth.ClientID, tok, time.Now())
	if err := file.Update(ctx, func(m map[string]Entry) error {
		m[key] = e
		return nil
	}); err != nil {
		return Entry{}, fmt.Errorf("log in to MCP server %s: %w", spec.Name, err)
	}
	return e, nil
}

// Logout removes spec's stored tokens; false when there were none.
func Logout(ctx context.Context, file File, spec api.MCPServerSpec) (bool, error) {
	key := Key(spec.URL, spec.OAuth.ClientID)
	var had bool
	err := file.Update(ctx, func(m map[string]Entry) error {
		_, had = m[key]
		delete(m, key)
		return nil
	})
	return had, err
}
