package config

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The platform services of docker-compose.temporal.yml (the worker and the gateway, built
// from ./Dockerfile) and the opt-in file that gives the worker the Docker socket.
const (
	svcWorker         = "worker"
	svcGateway        = "gateway"
	dockerSandboxFile = "../docker-compose.docker-sandbox.yml"
	gatewayConfigFile = "../deploy/nexo/gateway.yaml"
	dockerSocket      = "/var/run/docker.sock"
)

// platformService is the part of the worker and gateway services this file inspects.
type platformService struct {
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image       string                       `yaml:"image"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
	Environment map[string]string            `yaml:"environment"`
	Volumes     []string                     `yaml:"volumes"`
	GroupAdd    []string                     `yaml:"group_add"`
	Privileged  bool                         `yaml:"privileged"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
}

func loadPlatformServices(t *testing.T, file string) map[string]platformService {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	var doc struct {
		Services map[string]platformService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return doc.Services
}

// TestComposePlatformServices: `up` brings up the worker and the gateway beside Temporal,
// both built from the repository's Dockerfile, after the namespace and search attributes
// exist, talking to the compose frontend and sharing one artifact store.
func TestComposePlatformServices(t *testing.T) {
	services := loadPlatformServices(t, composeFile)
	worker, gateway := services[svcWorker], services[svcGateway]
	for name, svc := range map[string]platformService{svcWorker: worker, svcGateway: gateway} {
		if svc.Build.Context != "." || svc.Build.Dockerfile != "Dockerfile" {
			t.Errorf("service %q builds %+v, want context . and the repository's Dockerfile", name, svc.Build)
		}
		if _, err := os.Stat("../" + svc.Build.Dockerfile); err != nil {
			t.Errorf("service %q: %v", name, err)
		}
		if got := svc.DependsOn[svcSetup]["condition"]; got != "service_completed_successfully" {
			t.Errorf("service %q depends on %s with condition %q, want service_completed_successfully (the worker checks the search attributes at start)", name, svcSetup, got)
		}
		if got := svc.Environment[envName("temporal.address")]; got != svcServer+":7233" {
			t.Errorf("service %q %s = %q, want %s:7233", name, envName("temporal.address"), got, svcServer)
		}
		if got, want := svc.Environment[envName("temporal.namespace")], "${"+envName("temporal.namespace")+":-default}"; got != want {
			t.Errorf("service %q %s = %q, want %q (the namespace temporal-setup creates)", name, envName("temporal.namespace"), got, want)
		}
		if !slicesContainsPrefix(svc.Volumes, "nexo-data:/data") {
			t.Errorf("service %q volumes %q lack the shared nexo-data:/data", name, svc.Volumes)
		}
	}
	if a, b := worker.Environment[envName("artifacts.url")], gateway.Environment[envName("artifacts.url")]; a == "" || a != b || !strings.HasPrefix(a, "file:///data/") {
		t.Errorf("artifacts.url: worker %q, gateway %q; want one store on the shared volume (/data)", a, b)
	}
	if worker.Image == "" || worker.Image != gateway.Image {
		t.Errorf("images: worker %q, gateway %q; want the one image both build", worker.Image, gateway.Image)
	}
	if got := strings.Join(append(gateway.Entrypoint, gateway.Command...), " "); got != "/usr/local/bin/starter serve" {
		t.Errorf("gateway runs %q, want `starter serve`", got)
	}
}

// TestComposeGatewayHasTokens: inside the network the gateway listens beyond loopback,
// which it refuses without tokens; the file gives it a token whose secret comes from the
// environment (never the file), and publishes it on 127.0.0.1 only, at the default port.
func TestComposeGatewayHasTokens(t *testing.T) {
	gateway := loadPlatformServices(t, composeFile)[svcGateway]
	addr := gateway.Environment[envName("gateway.addr")]
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "0.0.0.0" {
		t.Fatalf("gateway %s = %q, want 0.0.0.0:<port> (reachable through the published port)", envName("gateway.addr"), addr)
	}
	_, defPort, _ := net.SplitHostPort(Defaults().Gateway.Addr)
	if port != defPort {
		t.Errorf("gateway listens on port %s, want the default %s", port, defPort)
	}
	if got := publishedPorts(t)[svcGateway]; len(got) != 1 || got[0] != defPort+":"+port {
		t.Errorf("gateway publishes %q, want exactly 127.0.0.1:%s:%s", got, defPort, port)
	}

	mount := "./" + strings.TrimPrefix(gatewayConfigFile, "../") + ":"
	if !slicesContainsPrefix(gateway.Volumes, mount) {
		t.Fatalf("gateway volumes %q do not mount %s", gateway.Volumes, gatewayConfigFile)
	}
	cfgPath := strings.SplitN(strings.TrimPrefix(firstWithPrefix(gateway.Volumes, mount), mount), ":", 2)[0]
	if got := gateway.Environment[envConfigFile]; got != cfgPath {
		t.Errorf("gateway %s = %q, want the mounted %s", envConfigFile, got, cfgPath)
	}
	cfg, err := Load(LoadOptions{File: gatewayConfigFile, Env: []string{}})
	if err != nil {
		t.Fatalf("load %s: %v", gatewayConfigFile, err)
	}
	if len(cfg.Gateway.Tokens) == 0 {
		t.Fatalf("%s has no gateway.tokens: the gateway would refuse to listen on %s", gatewayConfigFile, addr)
	}
	for _, tok := range cfg.Gateway.Tokens {
		want := "${" + tok.TokenEnv + ":-}"
		if got, ok := gateway.Environment[tok.TokenEnv]; !ok || got != want {
			t.Errorf("token %s reads %s, which the gateway service sets to %q; want %q (passed from the shell, never written in the file)", tok.Name, tok.TokenEnv, got, want)
		}
	}
}

// TestComposeDockerSocketOptIn: the default file gives no service the Docker socket (whoever
// holds it is root on the host); docker-compose.docker-sandbox.yml adds it to the worker
// only, without privileged mode.
func TestComposeDockerSocketOptIn(t *testing.T) {
	for name, svc := range loadPlatformServices(t, composeFile) {
		for _, v := range svc.Volumes {
			if strings.Contains(v, "docker.sock") {
				t.Errorf("service %q mounts %s in the default file; the socket is opt-in (%s)", name, v, dockerSandboxFile)
			}
		}
		if svc.Privileged {
			t.Errorf("service %q is privileged", name)
		}
	}
	override := loadPlatformServices(t, dockerSandboxFile)
	if len(override) != 1 {
		t.Errorf("%s changes services %v, want only %q", dockerSandboxFile, keys(override), svcWorker)
	}
	w := override[svcWorker]
	if !slicesContainsPrefix(w.Volumes, dockerSocket+":"+dockerSocket) {
		t.Errorf("%s: worker volumes %q lack the Docker socket", dockerSandboxFile, w.Volumes)
	}
	if w.Privileged {
		t.Errorf("%s makes the worker privileged; the socket is enough", dockerSandboxFile)
	}
	if len(w.GroupAdd) != 1 {
		t.Errorf("%s: worker group_add %q, want the socket's group (the image runs as a non-root user)", dockerSandboxFile, w.GroupAdd)
	}
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), filepath.Base(dockerSandboxFile)) {
		t.Errorf("%s does not say how to opt in to the socket (%s)", composeFile, filepath.Base(dockerSandboxFile))
	}
}

// composeCommand returns the compose tool installed here: `docker compose` (v2, the
// Docker CLI plugin) or `docker-compose` (v1, the Debian package CI installs). The docs
// tell users either works, so a test that needs one takes whichever there is.
func composeCommand(ctx context.Context) ([]string, bool) {
	for _, c := range [][]string{{"docker", "compose"}, {"docker-compose"}} {
		if _, err := exec.LookPath(c[0]); err != nil {
			continue
		}
		if exec.CommandContext(ctx, c[0], append(c[1:], "version")...).Run() == nil {
			return c, true
		}
	}
	return nil, false
}

// TestComposeConfigWithDockerSandbox validates the two files together with the compose
// tool there is (docker compose or docker-compose), and checks the merged worker has the
// socket.
func TestComposeConfigWithDockerSandbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	compose, ok := composeCommand(ctx)
	if !ok {
		t.Skip("neither `docker compose` nor `docker-compose` is installed; cannot run `config`")
	}
	for _, files := range [][]string{
		{filepath.Base(composeFile)},
		{filepath.Base(composeFile), filepath.Base(dockerSandboxFile)},
	} {
		args := append([]string{}, compose[1:]...)
		for _, f := range files {
			args = append(args, "-f", f)
		}
		cmd := exec.CommandContext(ctx, compose[0], append(args, "config")...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "NEXO_GATEWAY_TOKEN=test-token")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s config: %v\n%s", compose[0], strings.Join(args, " "), err, out)
		}
		var merged struct {
			Services map[string]platformService `yaml:"services"`
		}
		if err := yaml.Unmarshal(out, &merged); err != nil {
			t.Fatalf("parse docker-compose config output: %v", err)
		}
		for _, name := range []string{svcPostgres, svcSchema, svcServer, svcSetup, svcUI, svcWorker, svcGateway} {
			if _, ok := merged.Services[name]; !ok {
				t.Errorf("%v: service %q missing after docker-compose config", files, name)
			}
		}
		hasSocket := slicesContainsPrefix(merged.Services[svcWorker].Volumes, dockerSocket)
		if want := len(files) == 2; hasSocket != want {
			t.Errorf("%v: worker mounts the Docker socket = %v, want %v", files, hasSocket, want)
		}
		if got := merged.Services[svcGateway].Environment["NEXO_GATEWAY_TOKEN"]; got != "test-token" {
			t.Errorf("%v: gateway NEXO_GATEWAY_TOKEN = %q, want the shell's value", files, got)
		}
	}
}

// publishedPorts is service → "hostport:containerport" for every 127.0.0.1 port.
func publishedPorts(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, svc := range loadCompose(t) {
		for _, p := range svc.Ports {
			if rest, ok := strings.CutPrefix(composeDefaults(p.Value), "127.0.0.1:"); ok {
				out[name] = append(out[name], rest)
			}
		}
	}
	return out
}

func slicesContainsPrefix(list []string, prefix string) bool {
	return firstWithPrefix(list, prefix) != ""
}

func firstWithPrefix(list []string, prefix string) string {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return s
		}
	}
	return ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBuildContextAndGitLeaveOutLocalState: what a checkout accumulates by following the
// docs (bin/ from `go build -o bin/`, .nexo/ from worker --dev, workspace/ from the
// examples' `dir: ./workspace`) stays out of the Docker build context (`docker compose
// build` sent 294 MB of bin/ before) and out of git.
func TestBuildContextAndGitLeaveOutLocalState(t *testing.T) {
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	ignored := func(dir string) bool {
		for _, p := range patterns {
			p = strings.Trim(p, "/")
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "**/"), dir); ok {
				return true
			}
		}
		return false
	}
	for _, dir := range []string{"bin", ".nexo", "workspace", ".git"} {
		if !ignored(dir) {
			t.Errorf(".dockerignore (%q) does not leave out %s/: it would be sent with every image build", patterns, dir)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	for _, path := range []string{"bin/worker", ".nexo/temporal.db", "workspace/notes.md"} {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", path)
		cmd.Dir = ".."
		if err := cmd.Run(); err != nil {
			t.Errorf("git check-ignore %s: %v; want it ignored (.gitignore)", path, err)
		}
	}
}
