package config

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeVar is a compose interpolation with a default: ${NAME:-default}.
var composeVar = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*):-([^}]*)\}`)

// composeDefaults is s as compose reads it with none of its variables set.
func composeDefaults(s string) string { return composeVar.ReplaceAllString(s, "$2") }

// composePortVars are the variables that move the compose file's host ports, by service,
// and the port each defaults to: the ports `worker --dev` uses.
var composePortVars = map[string]struct {
	env  string
	port int
}{
	svcServer:  {"NEXO_FRONTEND_PORT", Defaults().Dev.FrontendPort},
	svcUI:      {"NEXO_UI_PORT", Defaults().Dev.UIPort},
	svcGateway: {"NEXO_GATEWAY_PORT", Defaults().PortBase + GatewayPortOffset},
}

// TestComposePortOverrides: each published host port is ${NEXO_…_PORT:-<default>}, the
// header comment names the three variables, the gateway's links (its page URL, the UI it
// links to and the UI origin its codec allows) follow the moved ports, and docker-compose
// config with the variables set publishes the moved ports.
func TestComposePortOverrides(t *testing.T) {
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	services := loadCompose(t)
	for svc, v := range composePortVars {
		want := "${" + v.env + ":-" + strconv.Itoa(v.port) + "}"
		ports := services[svc].Ports
		if len(ports) != 1 || !strings.HasPrefix(ports[0].Value, "127.0.0.1:"+want+":") {
			var got []string
			for _, p := range ports {
				got = append(got, p.Value)
			}
			t.Errorf("service %s publishes %q, want 127.0.0.1:%s:<container port>", svc, got, want)
		}
		if !strings.Contains(headerComment(string(data)), v.env) {
			t.Errorf("the header comment of %s does not document %s", composeFile, v.env)
		}
	}
	gw := loadPlatformServices(t, composeFile)[svcGateway].Environment
	ui, page := "${NEXO_UI_PORT:-8233}", "${NEXO_GATEWAY_PORT:-8234}"
	for env, want := range map[string]string{
		envName("gateway.url"):           "http://127.0.0.1:" + page,
		envName("gateway.temporal_ui"):   "http://127.0.0.1:" + ui,
		envName("gateway.codec_origins"): "http://127.0.0.1:" + ui,
	} {
		if gw[env] != want {
			t.Errorf("gateway %s = %q, want %q (the browser reaches the published port)", env, gw[env], want)
		}
	}

	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Skip("docker-compose not on PATH; cannot run `docker-compose config` with the overrides")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker-compose", "-f", filepath.Base(composeFile), "config")
	cmd.Dir = filepath.Dir(composeFile)
	cmd.Env = append(os.Environ(), "NEXO_FRONTEND_PORT=17233", "NEXO_UI_PORT=18233", "NEXO_GATEWAY_PORT=18234")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var merged struct {
		Services map[string]platformService `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &merged); err != nil {
		t.Fatalf("parse docker-compose config output: %v", err)
	}
	for svc, want := range map[string]string{svcServer: "127.0.0.1:17233:7233", svcUI: "127.0.0.1:18233:8080", svcGateway: "127.0.0.1:18234:8234"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("docker-compose config with the overrides: service %s does not publish %s\n%s", svc, want, out)
		}
	}
	if got := merged.Services[svcGateway].Environment[envName("gateway.url")]; got != "http://127.0.0.1:18234" {
		t.Errorf("gateway %s with the overrides = %q, want http://127.0.0.1:18234", envName("gateway.url"), got)
	}
}

// headerComment is the comment block a YAML file starts with.
func headerComment(file string) string {
	var b strings.Builder
	for _, line := range strings.Split(file, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
