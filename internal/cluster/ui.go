package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// uiPackage is the cluster's Temporal Web UI, a main package of this module.
const uiPackage = "github.com/nexo-temporal/nexo/internal/cluster/cmd/ui"

// BuildUI builds the Web UI process (internal/cluster/cmd/ui, github.com/temporalio/ui-server
// at the version go.mod requires) into dir and returns its path. repoDir is any directory of the
// Nexo module. It is built on every call (the Go build cache makes a rebuild quick), so it is
// always the code of the checkout.
func BuildUI(ctx context.Context, repoDir, dir string) (string, error) {
	out := filepath.Join(dir, "temporal-ui")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, uiPackage)
	cmd.Dir = repoDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the Web UI (%s in %s): %w\n%s", uiPackage, repoDir, err, b)
	}
	return out, nil
}

// startUI builds and starts the Web UI against the frontend on a free port and waits until
// its /healthz answers. With TLS it presents the cluster's client certificate and verifies
// the frontend against the cluster's CA.
func (c *Cluster) startUI(ctx context.Context) error {
	bin, err := BuildUI(ctx, c.opts.RepoDir, c.opts.Dir)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{"--address", c.FrontendAddress(), "--namespace", c.opts.Namespace,
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port)}
	if c.tls != nil {
		args = append(args, "--tls-ca", c.tls.CA, "--tls-cert", c.tls.ClientCert,
			"--tls-key", c.tls.ClientKey, "--tls-server-name", c.tls.ServerName)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.opts.Dir
	p, err := startProcess("temporal-ui", cmd, filepath.Join(c.logs, "temporal-ui.log"), "")
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ui, c.uiPort = p, port
	c.mu.Unlock()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.UIURL()+"/healthz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("web UI not answering /healthz: %w\n%s", ctx.Err(), p.tail())
		case <-deadline.C:
			return fmt.Errorf("web UI not answering /healthz after 1m:\n%s", p.tail())
		case <-p.done:
			return fmt.Errorf("web UI exited:\n%s", p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// UIURL is the Web UI's base URL (http://127.0.0.1:port), "" without Options.UI. Its API
// (/api/v1/namespaces/<ns>/workflows, …) is the UI server's proxy to the frontend.
func (c *Cluster) UIURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uiPort == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(c.uiPort)
}

// stopUI interrupts the Web UI and waits for it to exit. The caller holds c.mu.
func (c *Cluster) stopUI() {
	if c.ui != nil {
		_ = c.ui.cmd.Process.Signal(os.Interrupt)
		c.ui.wait(10 * time.Second)
		c.ui = nil
	}
}
