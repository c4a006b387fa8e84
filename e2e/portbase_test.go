package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// newPlatformAtBase is newPlatform whose processes get only NEXO_PORT_BASE (a free base
// from holdPortBase) in place of the per-port settings.
func newPlatformAtBase(t testing.TB) *platform {
	t.Helper()
	base, held := holdPortBase(t)
	p := &platform{t: t, dir: t.TempDir(), frontend: base, ui: base + portBaseOffsets[1],
		gateway: base + portBaseOffsets[2], held: held, portBase: base}
	t.Cleanup(p.stop)
	return p
}

// TestPortBaseMovesThePlatform: worker --dev with only NEXO_PORT_BASE set serves the
// frontend on the base, the Web UI on base+1000 and the web page on base+1001 (issue 29
// item 4); a starter with the same variable finds the server and links the run it starts
// to its page on base+1001. A starter told only the frontend's address (its own
// gateway.addr still the default 8234) links to the same page, which it learns from the
// registry, where the worker announced it.
func TestPortBaseMovesThePlatform(t *testing.T) {
	t.Parallel()
	p := newPlatformAtBase(t)
	p.start()
	out := p.output()
	for _, want := range []string{
		fmt.Sprintf("Temporal server: 127.0.0.1:%d ", p.frontend),
		fmt.Sprintf("Temporal Web UI: http://127.0.0.1:%d/", p.ui),
		fmt.Sprintf("Nexo HTTP API and web page: http://127.0.0.1:%d/", p.gateway),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("worker output lacks %q:\n%s", want, out)
		}
	}

	checkLink := func(who, id string) {
		t.Helper()
		page := fmt.Sprintf("http://127.0.0.1:%d/runs/%s", p.gateway, id)
		summary, _ := uiUserMetadata(t, p, id)
		if want := "DocumentApproval run · [open in Nexo](" + page + ")"; summary != want {
			t.Errorf("%s: the Temporal UI's summary of run %s is %q, want %q", who, id, summary, want)
		}
		pollUntil(t, 10*time.Second, "the linked page", func(ctx context.Context) error {
			return httpGetContains(ctx, page, id)
		})
	}
	id := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"42"}`))
	checkLink("starter with NEXO_PORT_BASE", id)

	// doctor says where the address came from, and finds the moved ports held by the platform.
	doc := p.starter("doctor").stdout
	for _, want := range []string{
		fmt.Sprintf("ok    temporal: 127.0.0.1:%d (from env NEXO_PORT_BASE)", p.frontend),
		fmt.Sprintf("ok    port 127.0.0.1:%d: Temporal frontend (worker --dev): in use by the running platform", p.frontend),
		fmt.Sprintf("ok    port 127.0.0.1:%d: Temporal Web UI (worker --dev): in use by the running platform", p.ui),
		fmt.Sprintf("ok    port 127.0.0.1:%d: gateway (worker --dev, starter serve): in use by the running platform", p.gateway),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("starter doctor with NEXO_PORT_BASE does not say %q:\n%s", want, doc)
		}
	}

	// The same starter told only where Temporal is: without the registry's page it
	// would link to 127.0.0.1:8234.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.starter, "run", "DocumentApproval", "--input", `{"doc_id":"43"}`)
	cmd.Dir = p.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEXO_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("NEXO_TEMPORAL_ADDRESS=127.0.0.1:%d", p.frontend))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("starter run with NEXO_TEMPORAL_ADDRESS only: %v\n%s", err, stderr.String())
	}
	checkLink("starter with NEXO_TEMPORAL_ADDRESS only", strings.TrimSpace(stdout.String()))
}

// TestTakenPortNamesTheSetting: worker --dev whose frontend port another program
// holds exits at once, its message naming the setting and its variable, and
// NEXO_PORT_BASE; under NEXO_PORT_BASE it names the base first. A taken gateway port is
// said the same way, and the worker runs without its page.
func TestTakenPortNamesTheSetting(t *testing.T) {
	t.Parallel()
	t.Run("dev.frontend_port", func(t *testing.T) {
		t.Parallel()
		p := newPlatform(t)
		blocker := holdPort(t) // held until the test ends: the "other program"
		p.extraEnv = []string{fmt.Sprintf("NEXO_DEV_FRONTEND_PORT=%d", blocker.Port)}
		r := p.runBin(bins.worker, "--dev")
		want := fmt.Sprintf("dev.frontend_port %d is taken (listen tcp 127.0.0.1:%d: bind: address already in use): "+
			"set dev.frontend_port or NEXO_DEV_FRONTEND_PORT, or NEXO_PORT_BASE to move all three", blocker.Port, blocker.Port)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("worker --dev with its frontend port held: exit %d, stderr\n%s\nwant exit 1 and %q", r.code, r.stderr, want)
		}
	})
	t.Run("NEXO_PORT_BASE", func(t *testing.T) {
		t.Parallel()
		base, _ := holdPortBase(t) // all three held until the test ends
		p := newPlatform(t)
		p.extraEnv = []string{"NEXO_DEV_FRONTEND_PORT=", "NEXO_DEV_UI_PORT=", "NEXO_GATEWAY_ADDR=", "NEXO_TEMPORAL_ADDRESS=",
			fmt.Sprintf("NEXO_PORT_BASE=%d", base)}
		r := p.runBin(bins.worker, "--dev")
		want := fmt.Sprintf("dev.frontend_port %d (from port_base) is taken (listen tcp 127.0.0.1:%d: bind: address already in use): "+
			"set NEXO_PORT_BASE (or port_base) to another base to move all three, or dev.frontend_port or NEXO_DEV_FRONTEND_PORT for this one", base, base)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("worker --dev with NEXO_PORT_BASE=%d held: exit %d, stderr\n%s\nwant exit 1 and %q", base, r.code, r.stderr, want)
		}
	})
	t.Run("gateway.addr", func(t *testing.T) {
		t.Parallel()
		p := newPlatform(t)
		blocker := holdPort(t)
		p.extraEnv = []string{fmt.Sprintf("NEXO_GATEWAY_ADDR=127.0.0.1:%d", blocker.Port)}
		p.start()
		want := fmt.Sprintf("Nexo HTTP API not started: gateway.addr 127.0.0.1:%d is taken (listen tcp 127.0.0.1:%d: bind: address already in use): "+
			"set gateway.addr or NEXO_GATEWAY_ADDR, or NEXO_PORT_BASE to move all three", blocker.Port, blocker.Port)
		if out := p.output(); !strings.Contains(out, want) {
			t.Errorf("worker --dev with its gateway port held: output\n%s\nwant %q", out, want)
		}
	})
}
