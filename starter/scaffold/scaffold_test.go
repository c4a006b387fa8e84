package scaffold

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestGoVersionIsThisModules keeps GoVersion, the go directive a scaffold declares
// without --replace, equal to this repository's: a lower one makes go refuse the module.
func TestGoVersionIsThisModules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Module.Mod.Path != NexoModule || f.Go.Version != GoVersion {
		t.Errorf("go.mod says module %s, go %s; scaffold has %s, go %s: update scaffold.GoVersion", f.Module.Mod.Path, f.Go.Version, NexoModule, GoVersion)
	}
}

func TestCreateWritesAModuleRequiringNexo(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "acme")
	written, err := Create(dir, Options{Module: "example.com/acme", Replace: filepath.Join("..", ".."), NexoVersion: "v0.0.0-20261206120000-0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "main.go", "README.md", ".gitignore", "nexo.yaml", "writer.script.json",
		"review/review.go", "review/desk.go", "review/replay_test.go", "review/review_test.go", "cmd/record/main.go",
		"testdata/draft_review_approved.json", "testdata/draft_review_denied.json"} {
		if !slices.Contains(written, want) {
			t.Errorf("Create wrote %q, want %s among them", written, want)
		}
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s: %v", want, err)
		}
	}
	for _, f := range written {
		if strings.HasSuffix(f, ".tmpl") {
			t.Errorf("template file %s written as is", f)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatalf("go.mod does not parse: %v\n%s", err, b)
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if mf.Module.Mod.Path != "example.com/acme" || mf.Go.Version != GoVersion ||
		len(mf.Require) != 1 || mf.Require[0].Mod.Path != NexoModule || mf.Require[0].Mod.Version != "v0.0.0-20261206120000-0123456789ab" ||
		len(mf.Replace) != 1 || mf.Replace[0].New.Path != root || len(mf.Tool) != 1 {
		t.Errorf("go.mod:\n%s", b)
	}
	main, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(main), `"example.com/acme/review"`) || !strings.Contains(string(main), "platform.Main(") {
		t.Errorf("main.go does not run platform.Main with example.com/acme/review:\n%s", main)
	}
}

func TestCreateWithoutReplaceTellsTheReadme(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // exists and is empty: allowed
	if _, err := Create(dir, Options{Module: "acme"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if mf, err := modfile.Parse("go.mod", b, nil); err != nil || len(mf.Replace) != 0 {
		t.Errorf("go.mod without --replace: %v, %d replace lines\n%s", err, len(mf.Replace), b)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	if !strings.Contains(string(readme), "go mod edit -replace github.com/nexo-temporal/nexo=") || !strings.Contains(string(readme), "go run ./cmd/record --id") {
		t.Errorf("README does not say how to add the replace line and record fixtures:\n%s", readme)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notNexo := t.TempDir()
	if err := os.WriteFile(filepath.Join(notNexo, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		o         Options
		want      error
		says      string
	}{
		{"non-empty dir", full, Options{Module: "example.com/acme"}, ErrDirNotEmpty, "notes.txt"},
		{"no module", "", Options{}, ErrBadModule, "--module is required"},
		{"bad module", "", Options{Module: "example.com/ac me"}, ErrBadModule, `--module "example.com/ac me"`},
		{"nexo's own module", "", Options{Module: NexoModule + "/mine"}, ErrBadModule, "Nexo's own module path"},
		{"replace without go.mod", "", Options{Module: "example.com/acme", Replace: t.TempDir()}, ErrBadReplace, "has no go.mod"},
		{"replace of another module", "", Options{Module: "example.com/acme", Replace: notNexo}, ErrBadReplace, "module example.com/other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "acme")
			}
			_, err := Create(dir, tc.o)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Create: %v, want %v saying %q", err, tc.want, tc.says)
			}
			if tc.dir == "" {
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("%s was created though the input was refused", dir)
				}
			}
		})
	}
}

func TestVersionIsAPseudoVersionOfTheBuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: NexoModule, Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Path: NexoModule, Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-06T12:00:00Z"}}}, "v0.0.0-20261206120000-0123456789ab"},
		{debug.BuildInfo{Main: debug.Module{Path: NexoModule, Version: "(devel)"}}, "v0.0.0-00010101000000-000000000000"},
	} {
		if got := version(&tc.bi); got != tc.want {
			t.Errorf("version(%+v) = %s, want %s", tc.bi.Main, got, tc.want)
		}
	}
}
