package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/devserver"
)

// TestStarterReadsTemporalProfile: the real starter, with no NEXO_TEMPORAL_* set, reaches
// the server named only by TEMPORAL_ADDRESS, then only by a TOML profile that
// TEMPORAL_CONFIG_FILE and TEMPORAL_PROFILE pick, as the `temporal` CLI would; when nothing
// answers, its error says where the address came from.
func TestStarterReadsTemporalProfile(t *testing.T) {
	t.Parallel()
	srv := startDevServer(t, devserver.Options{})
	t.Cleanup(func() { _ = srv.Stop() })
	dir := t.TempDir()
	toml := filepath.Join(dir, "temporal.toml")
	if err := os.WriteFile(toml, []byte("[profile.default]\naddress = \"127.0.0.1:1\"\n\n[profile.local]\naddress = \""+srv.FrontendAddress()+"\"\nnamespace = \"default\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := freePort(t)
	starter := func(env ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bins.starter, "list")
		cmd.Dir = dir
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "NEXO_") && !strings.HasPrefix(kv, "TEMPORAL_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+dir) // no profile of this machine's user
		cmd.Env = append(cmd.Env, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}
	if out, code := starter("TEMPORAL_ADDRESS=" + srv.FrontendAddress()); code != 0 {
		t.Errorf("starter list with TEMPORAL_ADDRESS only: exit %d\n%s", code, out)
	}
	if out, code := starter("TEMPORAL_CONFIG_FILE="+toml, "TEMPORAL_PROFILE=local"); code != 0 {
		t.Errorf("starter list with the TOML profile local: exit %d\n%s", code, out)
	}
	out, code := starter("TEMPORAL_ADDRESS=127.0.0.1:" + strconv.Itoa(dead))
	if code == 0 || !strings.Contains(out, "from TEMPORAL_ADDRESS") {
		t.Errorf("starter list against nothing: exit %d, want an error naming TEMPORAL_ADDRESS\n%s", code, out)
	}
	out, code = starter("TEMPORAL_CONFIG_FILE="+toml, "NEXO_TEMPORAL_ADDRESS="+srv.FrontendAddress())
	if code != 0 {
		t.Errorf("NEXO_TEMPORAL_ADDRESS did not beat the profile's dead address: exit %d\n%s", code, out)
	}
}
