package api_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nexo-temporal/nexo/"

// pkgGraph is the import graph of the module's packages and everything they reach, from
// `go list -deps -json`: what each package imports directly, and which are standard.
type pkgGraph struct {
	imports  map[string][]string
	standard map[string]bool
	roots    map[string][]string // a pattern → the module packages it matched
}

func loadGraph(t *testing.T, patterns ...string) *pkgGraph {
	t.Helper()
	g := &pkgGraph{imports: map[string][]string{}, standard: map[string]bool{}, roots: map[string][]string{}}
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports,Standard,DepOnly"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var matched []string
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
			DepOnly    bool
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		g.imports[p.ImportPath] = p.Imports
		g.standard[p.ImportPath] = p.Standard
		if !p.DepOnly {
			matched = append(matched, p.ImportPath)
		}
	}
	for _, pat := range patterns {
		prefix := strings.TrimSuffix(module+strings.TrimSuffix(strings.TrimPrefix(pat, "./"), "..."), "/")
		for _, m := range matched {
			if m == prefix || (strings.HasSuffix(pat, "...") && strings.HasPrefix(m, prefix+"/")) {
				g.roots[pat] = append(g.roots[pat], m)
			}
		}
		if len(g.roots[pat]) == 0 {
			t.Fatalf("pattern %s matched no package", pat)
		}
	}
	return g
}

// reach walks everything root reaches and returns, for each package bad accepts, the
// import path from root to it (the first one found, breadth first: a shortest one).
func (g *pkgGraph) reach(root string, bad func(string) bool) map[string][]string {
	from := map[string]string{root: ""}
	queue := []string{root}
	found := map[string][]string{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != root && bad(p) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append(chain, strings.TrimPrefix(q, module))
			}
			slices.Reverse(chain)
			found[p] = chain
			continue // one offending package is enough on this path
		}
		for _, imp := range g.imports[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return found
}

// inModule reports whether p is one of this module's packages.
func inModule(p string) bool { return strings.HasPrefix(p, module) }

// under reports whether p is the module package dir or below it.
func under(p, dir string) bool {
	return p == module+dir || strings.HasPrefix(p, module+dir+"/")
}

// TestRoomBoundaries enforces ARCHITECTURE §3 on everything a room's packages reach, by
// any path (go list -deps), not only on what they import directly: the wire contract and
// the pure policy depend on the standard library only, workflow code imports no I/O
// package (its side effects must be activities, or replay breaks), the authoring API never
// reaches the Temporal server, and devserver is the only room that links it.
func TestRoomBoundaries(t *testing.T) {
	g := loadGraph(t, "./...")
	roomRules := []struct {
		room string // a go list pattern
		why  string
		// allowed reports whether a package the room reaches is fine.
		allowed func(dep string) bool
	}{
		{"./api", "api: the standard library only", func(d string) bool { return g.standard[d] }},
		{"./permissions", "permissions: api and the standard library", func(d string) bool {
			return g.standard[d] || d == module+"api"
		}},
		{"./agents", "agents (pure data): api, permissions and the standard library", func(d string) bool {
			return g.standard[d] || d == module+"api" || d == module+"permissions"
		}},
		{"./skills", "skills: api, internal/suggest, a YAML parser and the standard library", func(d string) bool {
			return g.standard[d] || d == module+"api" || d == module+"internal/suggest" || d == "go.yaml.in/yaml/v3"
		}},
		{"./sandbox", "sandbox (the interface and the virtual and local tiers): the standard library", func(d string) bool {
			return g.standard[d]
		}},
		{"./api/searchattr", "api/searchattr: api and the SDK's temporal package, no other of this module", func(d string) bool {
			return !inModule(d) || d == module+"api"
		}},
		{"./internal/secrets", "internal/secrets: the standard library", func(d string) bool { return g.standard[d] }},
		{"./fakellm", "fakellm (a test double users run): the standard library", func(d string) bool { return g.standard[d] }},
		// Of the module, the authoring API and the run runtime reach only the wire contract
		// and the pure rooms. internal/execlocal is the runtime's execution-local map, which
		// issue 26 (item 3) replaces with an interceptor; drop it here when it goes.
		// api/searchattr is the typed search-attribute keys (the SDK's type around api's
		// names), declared once for the workflows and runs.
		{"./workflows/...", "workflows: of this module only api, agents, permissions", func(d string) bool {
			return !inModule(d) || under(d, "workflows") || d == module+"api" || d == module+"api/searchattr" || d == module+"agents" ||
				d == module+"permissions" || d == module+"internal/execlocal"
		}},
	}
	for _, r := range roomRules {
		t.Run(r.why, func(t *testing.T) {
			for _, root := range g.roots[r.room] {
				for dep, chain := range g.reach(root, func(d string) bool { return !r.allowed(d) }) {
					t.Errorf("%s reaches %s: %s", strings.TrimPrefix(root, module), dep, strings.Join(chain, " → "))
				}
			}
		})
	}

	// Workflow code reaches no I/O client by any path, and imports no I/O package of the
	// standard library directly (the SDK itself uses os and sync, so those are checked on
	// the workflow packages' own imports).
	t.Run("workflows reach no I/O client and import no I/O package", func(t *testing.T) {
		clients := []string{
			"github.com/docker/docker", "github.com/moby/moby", "github.com/sashabaranov/go-openai", "github.com/mark3labs/mcp-go",
			"github.com/modelcontextprotocol/go-sdk", "github.com/spf13/viper", "gocloud.dev",
			module + "activities", module + "sandbox", module + "config", module + "skills", module + "artifacts",
		}
		isClient := func(d string) bool {
			for _, c := range clients {
				if d == c || strings.HasPrefix(d, c+"/") {
					return true
				}
			}
			return false
		}
		direct := []string{"os", "os/exec", "net", "net/http", "io/ioutil", "math/rand", "sync"}
		for _, root := range g.roots["./workflows/..."] {
			for dep, chain := range g.reach(root, isClient) {
				t.Errorf("%s reaches %s: %s", strings.TrimPrefix(root, module), dep, strings.Join(chain, " → "))
			}
			for _, imp := range g.imports[root] {
				for _, f := range direct {
					if imp == f || strings.HasPrefix(imp, f+"/") {
						t.Errorf("%s imports %s", strings.TrimPrefix(root, module), imp)
					}
				}
			}
		}
	})

	// A user's workflow imports the authoring API; that must not link the Temporal server
	// (a minute or more to link, and a server in every user's binary). Only devserver links
	// it, and what is built on devserver on purpose: platform/dev (the --dev option) and the
	// main packages that offer --dev.
	t.Run("only devserver links the Temporal server", func(t *testing.T) {
		isServer := func(d string) bool {
			return strings.HasPrefix(d, "go.temporal.io/server/") || d == "go.temporal.io/server"
		}
		for _, root := range g.roots["./..."] {
			chains := g.reach(root, func(d string) bool { return isServer(d) || d == module+"devserver" })
			if len(chains) == 0 {
				continue
			}
			rel := strings.TrimPrefix(root, module)
			switch {
			case under(root, "workflows"), rel == "api", rel == "platform":
				for dep, chain := range chains {
					t.Errorf("authoring API package %s reaches %s: %s", rel, dep, strings.Join(chain, " → "))
				}
			case slices.Contains([]string{"devserver", "platform/dev", "worker", "bench", "examples/custom-worker"}, rel):
			default:
				for dep, chain := range chains {
					t.Errorf("%s reaches %s (only devserver, platform/dev and the --dev mains may): %s", rel, dep, strings.Join(chain, " → "))
				}
			}
		}
	})

	t.Run("only config imports viper", func(t *testing.T) {
		for _, root := range g.roots["./..."] {
			if root == module+"config" {
				continue
			}
			for _, imp := range g.imports[root] {
				if imp == "github.com/spf13/viper" || strings.HasPrefix(imp, "github.com/spf13/viper/") {
					t.Errorf("%s imports %s; only config may", strings.TrimPrefix(root, module), imp)
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
