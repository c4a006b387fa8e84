package activities_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox/egress"
)

// TestShellToolEgressRecords: a shell call on a bubblewrap sandbox with egress returns
// what its command asked of the proxy, one record per request, for the workflow's egress
// events; Release ends the run's session. A sandbox whose inject names an unset variable
// is a non-retryable error naming the field.
func TestShellToolEgressRecords(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl is missing under CI (.ci/run installs it): %v", err)
		}
		t.Skip("no /usr/bin/curl on this host")
	}
	e := newEnv(t, activities.Deps{})
	enableBubblewrap(t, e.sbs)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Header.Get("X-Key")))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	proxy, err := egress.New(egress.Options{Dir: t.TempDir(), LookupEnv: func(n string) (string, bool) { return "k-123", n == "KEY" }})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	fwd, err := egress.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.sbs.WithEgress(proxy, fwd)
	spec := api.SandboxSpec{Type: api.SandboxBubblewrap, Egress: &api.EgressSpec{Agent: "box", Allow: []string{u.Host},
		Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "X-Key", ValueEnv: "KEY"}}}}
	res, err := e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun, Sandbox: spec, CallID: "c", Tool: agents.ToolShell,
		Args: argsJSON(t, map[string]any{"command": "curl -sS " + srv.URL + "/a; echo; curl -sS http://127.0.0.3:9/"})})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Content, "k-123") || !strings.Contains(res.Content, "egress to 127.0.0.3:9 is not allowed for agent box") {
		t.Errorf("shell result = %q, want the server's answer and the proxy's refusal", res.Content)
	}
	if len(res.Egress) != 2 || res.Egress[0].Status != 200 || res.Egress[0].Injected != "X-Key" || res.Egress[1].Status != 403 || res.EgressDropped != 0 {
		t.Errorf("egress records = %+v (dropped %d), want the GET and the refusal", res.Egress, res.EgressDropped)
	}
	if err := e.sbs.Release(context.Background(), testRun, spec); err != nil {
		t.Fatal(err)
	}
	if s := proxy.Session(testRun + "\x00" + spec.Type + "\x00"); s != nil {
		t.Error("the run's egress session is still open after Release")
	}

	bad := spec
	bad.Egress = &api.EgressSpec{Agent: "box", Allow: []string{u.Host}, Inject: []api.EgressInject{{Host: "127.0.0.1", Header: "X-Key", ValueEnv: "UNSET"}}}
	_, err = e.a.Tools.RunTool(context.Background(), api.RunToolRequest{RunID: testRun + "-2", Sandbox: bad, CallID: "c", Tool: agents.ToolShell,
		Args: argsJSON(t, map[string]any{"command": "true"})})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "agents[box].sandbox.egress.inject[0].value_env: UNSET") {
		t.Errorf("RunTool with an unset value_env = %v, want a non-retryable error naming the field", err)
	}
}
