package config

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nexo-temporal/nexo/api"
)

// The compose file lives at the repository root, one level above this package. Its images
// cannot be pulled on the CI machines, so this test checks what can be checked without
// running it: structure, loopback-only ports, pinned versions that match the embedded
// server, the search-attribute job, shell syntax, and `docker compose config`.
const composeFile = "../docker-compose.temporal.yml"

// composeService is the part of a compose service the test inspects. Ports are kept as
// yaml nodes because compose allows both "ip:host:container" strings and mappings.
type composeService struct {
	Image       string                       `yaml:"image"`
	Ports       []yaml.Node                  `yaml:"ports"`
	NetworkMode string                       `yaml:"network_mode"`
	Healthcheck map[string]any               `yaml:"healthcheck"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Environment map[string]string            `yaml:"environment"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
	Volumes     []string                     `yaml:"volumes"`
}

func loadCompose(t *testing.T) map[string]composeService {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatalf("read compose file: %v", err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse %s: %v", composeFile, err)
	}
	return doc.Services
}

// Service names other files and docs refer to.
const (
	svcPostgres = "postgresql"
	svcSchema   = "temporal-schema"
	svcServer   = "temporal"
	svcSetup    = "temporal-setup"
	svcUI       = "temporal-ui"
)

func TestComposeServices(t *testing.T) {
	services := loadCompose(t)
	for _, name := range []string{svcPostgres, svcSchema, svcServer, svcSetup, svcUI} {
		if _, ok := services[name]; !ok {
			t.Errorf("service %q missing", name)
		}
	}

	t.Run("long-running services have healthchecks", func(t *testing.T) {
		for _, name := range []string{svcPostgres, svcServer, svcUI} {
			if test, _ := services[name].Healthcheck["test"].([]any); len(test) == 0 {
				t.Errorf("service %q has no healthcheck test", name)
			}
		}
	})

	t.Run("start order", func(t *testing.T) {
		for _, dep := range []struct{ svc, on, condition string }{
			{svcSchema, svcPostgres, "service_healthy"},
			{svcServer, svcSchema, "service_completed_successfully"},
			{svcSetup, svcServer, "service_healthy"},
			{svcUI, svcServer, "service_healthy"},
		} {
			if got := services[dep.svc].DependsOn[dep.on]["condition"]; got != dep.condition {
				t.Errorf("%s depends on %s with condition %q, want %q", dep.svc, dep.on, got, dep.condition)
			}
		}
	})
}

func TestComposePortsAreLoopbackOnly(t *testing.T) {
	services := loadCompose(t)
	published := map[string][]string{} // service → "hostport:containerport"
	for name, svc := range services {
		if svc.NetworkMode == "host" {
			t.Errorf("service %q uses network_mode host, which publishes every port on every interface", name)
		}
		for _, port := range svc.Ports {
			switch port.Kind {
			case yaml.ScalarNode:
				rest, ok := strings.CutPrefix(composeDefaults(port.Value), "127.0.0.1:")
				if !ok {
					t.Errorf("service %q publishes %q: want it bound to 127.0.0.1", name, port.Value)
					continue
				}
				published[name] = append(published[name], rest)
			case yaml.MappingNode:
				var long struct {
					HostIP    string `yaml:"host_ip"`
					Published string `yaml:"published"`
					Target    string `yaml:"target"`
				}
				if err := port.Decode(&long); err != nil {
					t.Fatalf("service %q port: %v", name, err)
				}
				if long.HostIP != "127.0.0.1" {
					t.Errorf("service %q publishes %s with host_ip %q: want 127.0.0.1", name, long.Published, long.HostIP)
				}
				published[name] = append(published[name], long.Published+":"+long.Target)
			default:
				t.Errorf("service %q: unexpected port entry at line %d", name, port.Line)
			}
		}
	}

	// The defaults must reach this stack without configuration: the frontend where
	// temporal.address points, the UI where the dev server's UI is.
	_, frontendPort, err := net.SplitHostPort(Defaults().Temporal.Address)
	if err != nil {
		t.Fatal(err)
	}
	wantPublished := map[string]string{
		svcServer: frontendPort + ":7233",
		svcUI:     strconv.Itoa(Defaults().Dev.UIPort) + ":8080",
	}
	for svc, want := range wantPublished {
		if got := published[svc]; len(got) != 1 || got[0] != want {
			t.Errorf("service %q publishes %q, want exactly 127.0.0.1:%s", svc, got, want)
		}
	}
	if got := published[svcPostgres]; len(got) != 0 {
		t.Errorf("postgresql publishes %q; the database should be reachable only by the Temporal containers", got)
	}
}

func TestComposeImagesPinned(t *testing.T) {
	services := loadCompose(t)
	version := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for name, svc := range services {
		repo, tag, ok := strings.Cut(svc.Image, ":")
		if !ok || tag == "" || tag == "latest" {
			t.Errorf("service %q image %q: want an explicit version tag", name, svc.Image)
			continue
		}
		if strings.HasPrefix(repo, "temporalio/") && !version.MatchString(tag) {
			t.Errorf("service %q image %q: want an exact x.y.z version", name, svc.Image)
		}
		if repo == "temporalio/auto-setup" {
			t.Errorf("service %q uses the deprecated auto-setup image", name)
		}
	}

	server := imageTag(services[svcServer].Image)
	for _, name := range []string{svcSchema, svcSetup} {
		if got := imageTag(services[name].Image); got != server {
			t.Errorf("service %q runs admin-tools %s, want the server's version %s (schema and CLI match the server)", name, got, server)
		}
	}
	// The compose server should be the same minor release as the embedded dev server, so a
	// workflow tested with `worker --dev` meets the same server features here.
	embedded := moduleVersion(t, "go.temporal.io/server")
	if minor(server) != minor(embedded) {
		t.Errorf("compose runs temporalio/server:%s but go.mod embeds go.temporal.io/server %s: keep the minor versions equal", server, embedded)
	}
}

func TestComposeSetupCreatesSearchAttribute(t *testing.T) {
	services := loadCompose(t)
	setup := services[svcSetup]
	script := strings.Join(setup.Command, "\n")
	for _, want := range []string{
		"search-attribute create",
		"--type Keyword",
		"namespace create",
		// every attribute the worker checks at start, each created by the loop
		"for attr in " + strings.Join(api.SearchAttributes, " ") + "; do",
		`--name "$$attr"`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("service %q command lacks %q", svcSetup, want)
		}
	}
	// A second `up` finds the attribute in place; that must not fail the job.
	if !strings.Contains(script, "already exists") {
		t.Errorf("service %q does not tolerate an existing search attribute", svcSetup)
	}
	// The namespace is the one the worker and starter use by default, overridable by the
	// same variable they read.
	wantNS := "${" + envName("temporal.namespace") + ":-" + api.DefaultNamespace + "}"
	if got := setup.Environment["NAMESPACE"]; got != wantNS {
		t.Errorf("service %q NAMESPACE = %q, want %q", svcSetup, got, wantNS)
	}
}

// TestComposeMountsExist: a bind mount of a missing directory makes docker create an empty
// one, and the server then fails without its dynamic config.
func TestComposeMountsExist(t *testing.T) {
	for name, svc := range loadCompose(t) {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") && !strings.HasPrefix(src, "../") {
				continue // a named volume
			}
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("service %q mounts %s: %v", name, src, err)
			}
		}
	}
}

// TestComposeScriptsParse runs `sh -n` over the inline scripts of the one-shot jobs, so a
// quoting slip shows up here and not on a user's first `up`.
func TestComposeScriptsParse(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	for _, name := range []string{svcSchema, svcSetup} {
		t.Run(name, func(t *testing.T) {
			svc := loadCompose(t)[name]
			if len(svc.Command) != 1 || strings.Join(svc.Entrypoint, " ") != "/bin/sh -c" {
				t.Fatalf("want entrypoint [/bin/sh -c] and one command string, got %q %q", svc.Entrypoint, svc.Command)
			}
			// Compose turns $$ into $ before the container sees the script.
			script := strings.ReplaceAll(svc.Command[0], "$$", "$")
			if out, err := exec.Command(sh, "-n", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("sh -n: %v\n%s", err, out)
			}
		})
	}
}

// TestComposeConfig asks the real compose tools to validate the file, which checks the
// schema, interpolation and anchors. Each tool is skipped when it is not installed.
func TestComposeConfig(t *testing.T) {
	tools := []struct {
		name  string
		probe []string
		cmd   []string
	}{
		{"docker-compose", []string{"docker-compose", "version"}, []string{"docker-compose"}},
		{"docker compose", []string{"docker", "compose", "version"}, []string{"docker", "compose"}},
	}
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			if _, err := exec.LookPath(tool.probe[0]); err != nil {
				t.Skipf("%s not on PATH; cannot run `%s config`", tool.probe[0], tool.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := exec.CommandContext(ctx, tool.probe[0], tool.probe[1:]...).Run(); err != nil {
				t.Skipf("`%s` failed (%v): %s is not installed", strings.Join(tool.probe, " "), err, tool.name)
			}
			args := append(tool.cmd[1:], "-f", filepath.Base(composeFile), "config", "-q")
			cmd := exec.CommandContext(ctx, tool.cmd[0], args...)
			cmd.Dir = filepath.Dir(composeFile)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s %s: %v\n%s", tool.cmd[0], strings.Join(args, " "), err, out)
			}
		})
	}
}

// imageTag returns the tag of image "repo:tag".
func imageTag(image string) string {
	_, tag, _ := strings.Cut(image, ":")
	return tag
}

// minor returns "1.32" for "1.32.1" or "v1.32.2".
func minor(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

// moduleVersion reads the version of module path from the repository's go.mod.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open("../go.mod")
	if err != nil {
		t.Fatalf("open go.mod: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == path {
			return fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read go.mod: %v", err)
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}
