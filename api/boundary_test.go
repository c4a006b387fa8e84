package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRoomBoundaries enforces ARCHITECTURE §3: the wire contract and the pure policy
// depend on the standard library only, and workflow code imports no I/O package (its side
// effects must be activities, or replay breaks).
func TestRoomBoundaries(t *testing.T) {
	golist := func(t *testing.T, format string, pkgs ...string) []string {
		t.Helper()
		args := append([]string{"list", "-f", format}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	const module = "github.com/nexo-temporal/nexo/"

	t.Run("api and permissions use only the standard library", func(t *testing.T) {
		for _, pkg := range []string{"./api", "./permissions"} {
			for _, dep := range golist(t, `{{join .Deps "\n"}}`, pkg) {
				first := strings.SplitN(dep, "/", 2)[0]
				if strings.Contains(first, ".") && dep != module+"api" {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	})

	t.Run("skills use only the standard library, api, internal/suggest and a YAML parser", func(t *testing.T) {
		for _, dep := range golist(t, `{{join .Deps "\n"}}`, "./skills") {
			first := strings.SplitN(dep, "/", 2)[0]
			if strings.Contains(first, ".") && dep != module+"api" && dep != module+"internal/suggest" && dep != "go.yaml.in/yaml/v3" {
				t.Errorf("skills depends on %s", dep)
			}
		}
	})

	t.Run("workflows import no I/O package", func(t *testing.T) {
		forbidden := []string{
			"os", "os/exec", "net", "net/http", "io/ioutil", "math/rand", "sync",
			"github.com/docker/docker", "github.com/sashabaranov/go-openai",
			"github.com/mark3labs/mcp-go", "github.com/spf13/viper",
			module + "activities", module + "sandbox", module + "config", module + "skills",
		}
		for _, imp := range golist(t, `{{join .Imports "\n"}}`, "./workflows") {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("workflows imports %s", imp)
				}
			}
		}
	})
}

// TestNoConfigBelowPlatform enforces ARCHITECTURE §3 for the rooms that may import
// "anything but config": the activities and the gateway take typed values (api's
// ModelPrice, gateway.Options) and never reach config, by any path, so they can be used
// and tested without the platform's config (gateway/gwconfig and platform translate it).
func TestNoConfigBelowPlatform(t *testing.T) {
	const module = "github.com/nexo-temporal/nexo/"
	for _, pkg := range []string{"./activities", "./gateway"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"config" || dep == "github.com/spf13/viper" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
