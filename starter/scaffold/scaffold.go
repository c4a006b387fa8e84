// Package scaffold writes a Go module of a user's own Nexo worker, outside this
// repository (`starter worker new`): main on platform.Main, one workflow with a
// checkpoint, a suspension and an agent step, its replay test over a recorded fixture, a
// command that records more fixtures from a running server, and a README. The files are
// the templates under template/ (Go files end in .tmpl, so the Go tools of this
// repository never build them); go.mod is written with golang.org/x/mod/modfile.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// NexoModule is the module path of this repository, which a scaffolded module requires.
const NexoModule = "github.com/nexo-temporal/nexo"

// GoVersion is the go directive of this repository's go.mod (a test keeps them equal): a
// module requiring Nexo must declare at least the Go version Nexo does.
const GoVersion = "1.26.10"

//go:embed all:template
var files embed.FS

var (
	// ErrDirNotEmpty: the target directory exists and holds files.
	ErrDirNotEmpty = errors.New("directory is not empty")
	// ErrBadModule: the module path is not one Go accepts.
	ErrBadModule = errors.New("bad module path")
	// ErrBadReplace: the --replace directory is not a checkout of this module.
	ErrBadReplace = errors.New("not a checkout of " + NexoModule)
)

// Options are what a scaffold is made of.
type Options struct {
	// Module is the new module's path (example.com/acme).
	Module string
	// Replace, if set, is a checkout of this repository: go.mod gets
	// replace github.com/nexo-temporal/nexo => Replace (made absolute).
	Replace string
	// NexoVersion is the version go.mod requires; "" means Version().
	NexoVersion string
}

// data is what the templates see.
type data struct {
	Module string // example.com/acme
	Name   string // acme: the binary `go build` makes
}

// CheckModule refuses a module path Go would not accept, and one inside Nexo's own.
func CheckModule(p string) error {
	if strings.TrimSpace(p) == "" {
		return fmt.Errorf("%w: --module is required (such as example.com/acme)", ErrBadModule)
	}
	if err := module.CheckImportPath(p); err != nil {
		return fmt.Errorf("--module %q: %w: %v", p, ErrBadModule, strings.TrimPrefix(err.Error(), fmt.Sprintf("malformed import path %q: ", p)))
	}
	if p == NexoModule || strings.HasPrefix(p, NexoModule+"/") {
		return fmt.Errorf("--module %q: %w: that is Nexo's own module path; pick yours (such as example.com/acme)", p, ErrBadModule)
	}
	return nil
}

// CheckReplace returns dir as an absolute path if it is a checkout of this module (its
// go.mod says module github.com/nexo-temporal/nexo), with the Go version it declares.
func CheckReplace(dir string) (abs, goVersion string, err error) {
	abs, err = filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("--replace %s: %w", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("--replace %s: %w (it has no go.mod; give the root of your Nexo checkout)", dir, ErrBadReplace)
		}
		return "", "", fmt.Errorf("--replace %s: %w", dir, err)
	}
	f, err := modfile.ParseLax(filepath.Join(abs, "go.mod"), b, nil)
	if err != nil {
		return "", "", fmt.Errorf("--replace %s: %w (its go.mod does not parse: %v)", dir, ErrBadReplace, err)
	}
	if f.Module == nil || f.Module.Mod.Path != NexoModule {
		got := "no module line"
		if f.Module != nil {
			got = "module " + f.Module.Mod.Path
		}
		return "", "", fmt.Errorf("--replace %s: %w (its go.mod says %s)", dir, ErrBadReplace, got)
	}
	if f.Go != nil {
		goVersion = f.Go.Version
	}
	return abs, goVersion, nil
}

// Version is the version of this module a scaffold requires: a pseudo-version of the
// commit the running binary was built from (Go's build info), or, for a binary built
// without version control information, the zero pseudo-version, which only a replace
// line can satisfy until Nexo is published.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return module.PseudoVersion("v0", "", time.Time{}, "000000000000")
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; bi.Main.Path == NexoModule && v != "" && v != "(devel)" && !strings.Contains(v, "+dirty") {
		return v
	}
	var rev string
	var at time.Time
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	if len(rev) < 12 || at.IsZero() {
		return module.PseudoVersion("v0", "", time.Time{}, "000000000000")
	}
	return module.PseudoVersion("v0", "", at, rev[:12])
}

// checkoutVersion is the pseudo-version of the commit a checkout is at (git's HEAD), ""
// when it is no git work tree or git is not installed: the replace line decides what is
// built either way, the version only says which commit the module was made against.
func checkoutVersion(dir string) string {
	out, err := exec.Command("git", "-C", dir, "show", "-s", "--format=%H %ct", "HEAD").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || len(f[0]) < 12 {
		return ""
	}
	sec, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return ""
	}
	return module.PseudoVersion("v0", "", time.Unix(sec, 0).UTC(), f[0][:12])
}

// Create writes the scaffold into dir, which must not exist or be empty, and returns the
// files written (slash paths relative to dir). Nothing is written when an input is bad.
func Create(dir string, o Options) ([]string, error) {
	if err := CheckModule(o.Module); err != nil {
		return nil, err
	}
	goVersion := GoVersion
	if o.Replace != "" {
		abs, gv, err := CheckReplace(o.Replace)
		if err != nil {
			return nil, err
		}
		o.Replace = abs
		if gv != "" {
			goVersion = gv
		}
	}
	if o.NexoVersion == "" && o.Replace != "" {
		o.NexoVersion = checkoutVersion(o.Replace)
	}
	if o.NexoVersion == "" {
		o.NexoVersion = Version()
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	gomod, err := goMod(o, goVersion)
	if err != nil {
		return nil, err
	}
	d := data{Module: o.Module, Name: path.Base(o.Module)}
	out := map[string][]byte{"go.mod": gomod}
	err = fs.WalkDir(files, "template", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "template/")
		if name, ok := strings.CutSuffix(rel, ".tmpl"); ok {
			t, err := template.New(rel).Option("missingkey=error").Parse(string(b))
			if err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			rel, b = name, buf.Bytes()
		}
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		out[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	written := make([]string, 0, len(out))
	for rel := range out {
		written = append(written, rel)
	}
	slices.Sort(written)
	for _, rel := range written {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, out[rel], 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
	}
	return written, nil
}

// checkDir refuses a dir that exists and is not an empty directory.
func checkDir(dir string) error {
	if strings.TrimSpace(dir) == "" {
		return errors.New("want the directory to create the module in")
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s: %w (it holds %s%s); give a new or empty directory", dir, ErrDirNotEmpty, ents[0].Name(), more(len(ents)-1))
	}
	return nil
}

func more(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// goMod is the new module's go.mod: it requires Nexo (and its fake model as a tool, for
// go tool fakellm), with the replace line when o.Replace is set.
func goMod(o Options, goVersion string) ([]byte, error) {
	f := new(modfile.File)
	f.AddComment("// Made by starter worker new. Until " + NexoModule + " is published, a replace line\n// points at a checkout of it (see README.md); then go mod tidy fills in go.sum.")
	steps := []error{
		f.AddModuleStmt(o.Module),
		f.AddGoStmt(goVersion),
		f.AddRequire(NexoModule, o.NexoVersion),
		f.AddTool(NexoModule + "/cmd/fakellm"),
	}
	if o.Replace != "" {
		steps = append(steps, f.AddReplace(NexoModule, "", o.Replace, ""))
	}
	if err := errors.Join(steps...); err != nil {
		return nil, fmt.Errorf("write go.mod: %w", err)
	}
	f.Cleanup()
	return modfile.Format(f.Syntax), nil
}
