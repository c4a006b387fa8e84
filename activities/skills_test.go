package activities_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// logo is not UTF-8 and holds CR LF, NUL and a lone CR: any text handling breaks it.
var logo = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\r")

// skillRoot writes a skill "kit" (a script, a binary asset, a reference) under a new
// skills folder and returns the folder.
func skillRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "kit")
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: kit\ndescription: Makes reports.\ncompatibility: needs sh\n---\n\nRun scripts/make.sh.\n")
	writeFile(t, filepath.Join(dir, "scripts", "make.sh"), "#!/bin/sh\necho made\n")
	if err := os.Chmod(filepath.Join(dir, "scripts", "make.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assets", "logo.png"), logo, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "references", "style.md"), "# Style\n")
	return root
}

func loadKit(t *testing.T, e *env) api.LoadSkillsResult {
	t.Helper()
	res, err := e.a.Tools.LoadSkills(context.Background(), api.LoadSkillsRequest{RunID: testRun, Names: []string{"kit"}})
	if err != nil {
		t.Fatalf("LoadSkills: %v", err)
	}
	if len(res.Skills) != 1 {
		t.Fatalf("skills = %+v", res.Skills)
	}
	return res
}

func TestLoadSkillsRecordsTextAndManifest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{SkillsPath: skillRoot(t)})
	s := loadKit(t, e).Skills[0]
	if s.Name != "kit" || s.Description != "Makes reports." || s.Compatibility != "needs sh" || s.Dir != "skills/kit" || s.StoreRun != "" {
		t.Errorf("loaded = %+v", s)
	}
	if !strings.HasPrefix(s.Prompt, "Skill kit: Makes reports.\n") || !strings.HasSuffix(s.Prompt, "Run scripts/make.sh.\n\nCompatibility: needs sh") {
		t.Errorf("prompt = %q", s.Prompt)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
		if f.Path == "scripts/make.sh" && !f.Executable {
			t.Error("make.sh not recorded as executable")
		}
	}
	if strings.Join(paths, " ") != "assets/logo.png references/style.md scripts/make.sh" {
		t.Errorf("files = %v", paths)
	}
	// The bytes are blobs named by the recorded sha256: any worker reads them.
	for _, f := range s.Files {
		if got, err := e.store.GetBlob(context.Background(), f.SHA256); err != nil || int64(len(got)) != f.Size {
			t.Errorf("blob of %s = %d bytes, %v; want %d", f.Path, len(got), err, f.Size)
		}
	}

	_, err := e.a.Tools.LoadSkills(context.Background(), api.LoadSkillsRequest{RunID: testRun, Names: []string{"missing"}})
	wantAppError(t, err, true, api.ErrTypeNotFound)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("missing", "SKILL.md")) {
		t.Errorf("missing skill error = %v, want the file named", err)
	}
}

// TestMaterializeSkillsLocal: the recorded files land under skills/kit/ byte for byte,
// the script executable; a skill changed on disk afterwards does not change what a later
// copy writes (the snapshot is the run's); skip_same leaves identical files alone and
// rewrites a tampered one.
func TestMaterializeSkillsLocal(t *testing.T) {
	t.Parallel()
	root := skillRoot(t)
	e := newEnv(t, activities.Deps{SkillsPath: root})
	loaded := loadKit(t, e)
	req := api.MaterializeSkillsRequest{RunID: testRun, Skills: loaded.Skills}
	res, err := e.a.Tools.MaterializeSkills(context.Background(), req)
	if err != nil {
		t.Fatalf("MaterializeSkills: %v", err)
	}
	if len(res.Written) != 3 || len(res.Skipped) != 0 {
		t.Errorf("result = %+v", res)
	}
	got, err := os.ReadFile(filepath.Join(e.ws, "skills", "kit", "assets", "logo.png"))
	if err != nil || !bytes.Equal(got, logo) {
		t.Fatalf("logo in the workspace = %q, %v; want the bytes verbatim", got, err)
	}
	if fi, err := os.Stat(filepath.Join(e.ws, "skills", "kit", "scripts", "make.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("make.sh mode = %v, %v; want executable", fi.Mode(), err)
	}

	// The skill changes on disk; the run keeps its snapshot.
	writeFile(t, filepath.Join(root, "kit", "references", "style.md"), "# Changed on disk\n")
	// The agent tampers with its copy, and leaves the others as they were.
	e.write(t, "skills/kit/scripts/make.sh", "rm -rf /\n")
	req.Mode = api.SkillFilesSkipSame
	res, err = e.a.Tools.MaterializeSkills(context.Background(), req)
	if err != nil {
		t.Fatalf("MaterializeSkills again: %v", err)
	}
	if strings.Join(res.Written, ",") != "skills/kit/scripts/make.sh" || len(res.Skipped) != 2 {
		t.Errorf("skip_same result = %+v, want only the tampered script written", res)
	}
	if c := fileContent(t, filepath.Join(e.ws, "skills", "kit", "scripts", "make.sh")); c != "#!/bin/sh\necho made\n" {
		t.Errorf("script after the second copy = %q", c)
	}
	if c := fileContent(t, filepath.Join(e.ws, "skills", "kit", "references", "style.md")); c != "# Style\n" {
		t.Errorf("reference = %q, want the recorded version, not the one on disk now", c)
	}

	// A store that no longer matches the manifest is an error, not a silent copy (seen by
	// a worker that has not cached the good bytes).
	sum := loaded.Skills[0].Files[0].SHA256
	writeFile(t, filepath.Join(e.dir, "blobs", sum), "corrupt")
	_, err = e.otherWorker(t, activities.Deps{}).Tools.MaterializeSkills(context.Background(), req)
	wantAppError(t, err, true, api.ErrTypeBadInput)
}

// TestSkillFilesAnyWorker: a skill loaded on one worker is copied by another (the bytes
// are blobs in the shared store, not files on the loading worker), and a run recorded
// before skill files were blobs still gets its files from where it kept them.
func TestSkillFilesAnyWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, activities.Deps{SkillsPath: skillRoot(t)})
	loaded := loadKit(t, e)
	other := e.otherWorker(t, activities.Deps{}) // no skills_path: it has no copy of its own
	res, err := other.Tools.MaterializeSkills(ctx, api.MaterializeSkillsRequest{RunID: testRun, Skills: loaded.Skills})
	if err != nil || len(res.Written) != 3 {
		t.Fatalf("MaterializeSkills on another worker = %+v, %v; want 3 files written", res, err)
	}
	if got, err := os.ReadFile(filepath.Join(e.ws, "skills", "kit", "assets", "logo.png")); err != nil || !bytes.Equal(got, logo) {
		t.Fatalf("logo copied by another worker = %q, %v", got, err)
	}

	// A manifest from before: bytes at <store_run>/__skillfile.<sha256>, no blob.
	old := []byte("#!/bin/sh\necho from before\n")
	oldSum := artifacts.Sum(old)
	if err := e.store.Put(ctx, "run-old", "__skillfile."+oldSum, old); err != nil {
		t.Fatal(err)
	}
	legacy := api.LoadedSkill{Name: "old", Dir: "skills/old", StoreRun: "run-old",
		Files: []api.SkillFile{{Path: "scripts/run.sh", Size: int64(len(old)), SHA256: oldSum, Executable: true}}}
	tests := []struct {
		name    string
		skill   api.LoadedSkill
		wantErr string // the error type, "" for success
	}{
		{"recorded before skill files were blobs", legacy, ""},
		{"bytes nowhere", api.LoadedSkill{Name: "lost", Dir: "skills/lost", StoreRun: "run-old",
			Files: []api.SkillFile{{Path: "a.txt", Size: 1, SHA256: artifacts.Sum([]byte("never stored"))}}}, api.ErrTypeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := other.Tools.MaterializeSkills(ctx, api.MaterializeSkillsRequest{RunID: testRun, Skills: []api.LoadedSkill{tt.skill}})
			if tt.wantErr != "" {
				wantAppError(t, err, true, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("MaterializeSkills: %v", err)
			}
			if c := fileContent(t, filepath.Join(e.ws, "skills", "old", "scripts", "run.sh")); c != string(old) {
				t.Errorf("legacy skill file = %q, want %q", c, old)
			}
		})
	}
	// The legacy copy is checked against its sha256 too.
	if err := e.store.Put(ctx, "run-old", "__skillfile."+oldSum, []byte("changed")); err != nil {
		t.Fatal(err)
	}
	_, err = other.Tools.MaterializeSkills(ctx, api.MaterializeSkillsRequest{RunID: testRun, Skills: []api.LoadedSkill{legacy}})
	wantAppError(t, err, true, api.ErrTypeBadInput)
}

func TestMaterializeSkillsVirtual(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{SkillsPath: skillRoot(t)})
	loaded := loadKit(t, e)
	spec := api.SandboxSpec{Type: api.SandboxVirtual}
	res, err := e.a.Tools.MaterializeSkills(context.Background(), api.MaterializeSkillsRequest{RunID: testRun, Sandbox: spec, Skills: loaded.Skills})
	if err != nil || len(res.Written) != 3 {
		t.Fatalf("MaterializeSkills into a virtual sandbox: %+v, %v", res, err)
	}
	sb, err := e.sbs.Get(testRun, spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.Read(context.Background(), "skills/kit/assets/logo.png")
	if err != nil || !bytes.Equal(got, logo) {
		t.Errorf("logo = %q, %v", got, err)
	}
}

func TestProbeSandboxLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	req := api.ProbeSandboxRequest{RunID: testRun, Requires: api.Requirements{
		Commands: map[string]string{"sh": "*", "nexo-no-such-command": ">=1"},
		Locale:   "en_US.UTF-8",
	}}
	python := ""
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		python = "python3"
		req.Requires.Commands[python] = ">=99"
	}
	res, err := e.a.Tools.ProbeSandbox(context.Background(), req)
	if err != nil {
		t.Fatalf("ProbeSandbox: %v", err)
	}
	if res.Commands["sh"].Path == "" || res.Locale != "C.UTF-8" {
		t.Errorf("probe = %+v, want sh found and the local tier's C.UTF-8", res)
	}
	got := strings.Join(res.Unmet, "; ")
	want := []string{"nexo-no-such-command missing", "locale is C.UTF-8, want en_US.UTF-8"}
	if python != "" {
		v := res.Commands["python3"].Version
		if v == "" {
			t.Fatalf("python3 version not read: %+v", res.Commands["python3"])
		}
		want = append(want[:1], "python3 "+v+" does not satisfy >=99", want[1])
	}
	if got != strings.Join(want, "; ") {
		t.Errorf("unmet = %q\nwant    %q", got, strings.Join(want, "; "))
	}

	// Met: nothing unmet.
	req.Requires = api.Requirements{Commands: map[string]string{"sh": ""}, Locale: "utf8"}
	if res, err := e.a.Tools.ProbeSandbox(context.Background(), req); err != nil || len(res.Unmet) != 0 {
		t.Errorf("met requirements: %+v, %v", res, err)
	}
}

func TestProbeSandboxVirtualIsAClearError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, activities.Deps{})
	_, err := e.a.Tools.ProbeSandbox(context.Background(), api.ProbeSandboxRequest{RunID: testRun,
		Sandbox: api.SandboxSpec{Type: api.SandboxVirtual}, Requires: api.Requirements{Locale: "utf8"}})
	wantAppError(t, err, true, api.ErrTypeBadInput)
	if err == nil || !strings.Contains(err.Error(), "could not inspect the sandbox") || !strings.Contains(err.Error(), "no shell") {
		t.Errorf("err = %v", err)
	}
}

// TestSkillsDockerTier: the same skill copied into a real container is intact (sha256sum
// inside the container), its script runs, and the probe sees busybox without python3.
// Skips without a Docker engine and the default image.
func TestSkillsDockerTier(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := docker.NewClient(ctx)
	if err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, docker.DefaultImage); err != nil {
		t.Skipf("no image %s (starter sandbox build-image): %v", docker.DefaultImage, err)
	}
	sbs, err := activities.NewSandboxes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mgr := docker.NewManager(cli, "gotest-skills")
	defer mgr.Close()
	sbs.WithDocker(mgr)
	e := newEnv(t, activities.Deps{SkillsPath: skillRoot(t), Sandboxes: sbs})
	runID := "gotest-skills-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	spec := api.SandboxSpec{Type: api.SandboxDocker}
	defer func() { _ = sbs.Release(context.Background(), runID, spec) }()

	loaded, err := e.a.Tools.LoadSkills(ctx, api.LoadSkillsRequest{RunID: runID, Names: []string{"kit"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Tools.MaterializeSkills(ctx, api.MaterializeSkillsRequest{RunID: runID, Sandbox: spec, Skills: loaded.Skills})
	if err != nil || len(res.Written) != 3 {
		t.Fatalf("MaterializeSkills: %+v, %v", res, err)
	}
	sb, err := sbs.Open(ctx, runID, spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sb.Shell(ctx, "sha256sum skills/kit/assets/logo.png; ./skills/kit/scripts/make.sh", 30*time.Second)
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("shell: %+v, %v", out, err)
	}
	var wantSum string
	for _, f := range loaded.Skills[0].Files {
		if f.Path == "assets/logo.png" {
			wantSum = f.SHA256
		}
	}
	if !strings.HasPrefix(out.Stdout, wantSum+" ") || !strings.Contains(out.Stdout, "made") {
		t.Errorf("in the container: %q; want the logo's sha256 %s and the script to run", out.Stdout, wantSum)
	}
	// skip_same: nothing changed, nothing written.
	res, err = e.a.Tools.MaterializeSkills(ctx, api.MaterializeSkillsRequest{RunID: runID, Sandbox: spec, Skills: loaded.Skills, Mode: api.SkillFilesSkipSame})
	if err != nil || len(res.Written) != 0 || len(res.Skipped) != 3 {
		t.Errorf("skip_same in the container: %+v, %v", res, err)
	}

	probe, err := e.a.Tools.ProbeSandbox(ctx, api.ProbeSandboxRequest{RunID: runID, Sandbox: spec,
		Requires: api.Requirements{Commands: map[string]string{"python3": ">=3.10", "sed": "*"}, Locale: "utf8"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(probe.Unmet, "; ")
	if got != "python3 missing; no locale set (LANG, LC_CTYPE and LC_ALL are empty), want utf8" || probe.Commands["sed"].Path == "" {
		t.Errorf("probe of the busybox image = %+v", probe)
	}
}
