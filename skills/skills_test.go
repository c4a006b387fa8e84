package skills_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/skills"
)

const fullSkill = `---
name: pdf-tools
description: >
  Extracts text and tables from PDF files.
  Use it when a PDF is mentioned.
compatibility: needs python3 3.10 or newer
license: Apache-2.0
allowed-tools: Bash(python3:*) Read
metadata:
  author: ada
  version: "1.2"
---

# PDF tools

Run scripts/extract.py on the file.
`

func TestParseFrontMatter(t *testing.T) {
	s, err := skills.Parse("pdf-tools/SKILL.md", []byte(fullSkill))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Name != "pdf-tools" || s.Description != "Extracts text and tables from PDF files. Use it when a PDF is mentioned." ||
		s.Compatibility != "needs python3 3.10 or newer" || s.License != "Apache-2.0" {
		t.Errorf("skill = %+v", s)
	}
	if strings.Join(s.AllowedTools, "|") != "Bash(python3:*)|Read" {
		t.Errorf("allowed-tools = %q", s.AllowedTools)
	}
	if s.Metadata["author"] != "ada" || s.Metadata["version"] != "1.2" {
		t.Errorf("metadata = %v", s.Metadata)
	}
	if s.Body != "# PDF tools\n\nRun scripts/extract.py on the file." {
		t.Errorf("body = %q", s.Body)
	}
}

func TestParseCRLFAndBOMAndListForm(t *testing.T) {
	src := "\ufeff---\r\nname: x\r\ndescription: d\r\nallowed-tools: [Read, Grep]\r\n---\r\nBody line\r\n"
	s, err := skills.Parse("x/SKILL.md", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Name != "x" || s.Description != "d" || s.Body != "Body line" || strings.Join(s.AllowedTools, ",") != "Read,Grep" {
		t.Errorf("skill = %+v", s)
	}
}

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // every one must appear in the error
	}{
		{"no front matter", "# Title\n", []string{"f/SKILL.md:1: no front matter"}},
		{"not closed", "---\nname: x\ndescription: d\n", []string{"front matter is not closed"}},
		{"not yaml", "---\nname: x\ndescription: [a\n---\nbody\n", []string{"f/SKILL.md: front matter: not YAML", "line "}},
		{"empty", "---\n---\nbody\n", []string{"front matter: is empty"}},
		{"missing both", "---\nlicense: MIT\n---\nbody\n", []string{
			"f/SKILL.md:2: name: required", "f/SKILL.md:2: description: required"}},
		{"typo", "---\nname: x\ndescripton: d\n---\nbody\n", []string{
			`f/SKILL.md:3: descripton: unknown key (did you mean "description"?`, "metadata:", "description: required"}},
		{"twice", "---\nname: x\nname: y\ndescription: d\n---\nbody\n", []string{"f/SKILL.md:3: name: declared twice (first on line 2)"}},
		{"empty body", "---\nname: x\ndescription: d\n---\n\n", []string{"f/SKILL.md:4: body: is empty"}},
		{"bad name", "---\nname: PDF Tools\ndescription: d\n---\nb\n", []string{"f/SKILL.md:2: name: skill name \"PDF Tools\""}},
		{"name not text", "---\nname: [a]\ndescription: d\n---\nb\n", []string{"f/SKILL.md:2: name: want text"}},
		{"empty name", "---\nname: \"\"\ndescription: \"  \"\n---\nb\n", []string{"name: is empty", "description: is empty"}},
		{"long description", "---\nname: x\ndescription: " + strings.Repeat("a", 1025) + "\n---\nb\n", []string{"description: is 1025 characters"}},
		{"metadata not a map", "---\nname: x\ndescription: d\nmetadata: [1]\n---\nb\n", []string{"metadata: want key: value pairs"}},
		{"not utf8", "---\nname: x\ndescription: \xff\n---\nb\n", []string{"is not UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := skills.Parse("f/SKILL.md", []byte(tc.src))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !errors.Is(err, skills.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// writeSkill makes root/name with SKILL.md and files (path → content).
func writeSkill(t *testing.T, root, name, skillMD string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	for p, c := range map[string]string{"SKILL.md": skillMD} {
		files[p] = c
	}
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func md(name string) string {
	return "---\nname: " + name + "\ndescription: Does " + name + " things.\n---\n\nDo it well.\n"
}

// binary is not UTF-8 and holds CR LF, NUL and a lone CR: any text handling breaks it.
var binary = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\r")

func TestLoadReadsFilesBinarySafe(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "kit", md("kit"), map[string]string{
		"scripts/run.sh":        "#!/bin/sh\necho hi\n",
		"scripts/lib/util.py":   "print('x')\n",
		"assets/logo.png":       string(binary),
		"references/guide.md":   "# Guide\n",
		"references/.keep":      "",
		"assets/.git/HEAD":      "ref",
		"README.md":             "not copied: only scripts/, assets/ and references/ are",
		"references/deep/a.txt": "a",
	})
	s, err := skills.Load(root, "kit")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
	}
	want := "assets/logo.png references/deep/a.txt references/guide.md scripts/lib/util.py scripts/run.sh"
	if strings.Join(paths, " ") != want {
		t.Errorf("files = %v, want %s", paths, want)
	}
	for _, f := range s.Files {
		switch f.Path {
		case "assets/logo.png":
			if !bytes.Equal(f.Data, binary) || f.Executable {
				t.Errorf("logo = %q (exec %v), want the bytes verbatim", f.Data, f.Executable)
			}
		case "scripts/run.sh":
			if !f.Executable {
				t.Error("run.sh lost its execute bit")
			}
		}
	}
	if s.Dir != filepath.Join(root, "kit") || s.SandboxDir() != "skills/kit" || s.Size() != int64(len(binary)+len("#!/bin/sh\necho hi\n")+len("print('x')\n")+len("# Guide\n")+1) {
		t.Errorf("dir %s sandbox dir %s size %d", s.Dir, s.SandboxDir(), s.Size())
	}
}

func TestLoadErrors(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "other", md("not-other"), map[string]string{})
	writeSkill(t, root, "linked", md("linked"), map[string]string{})
	if err := os.MkdirAll(filepath.Join(root, "linked", "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "linked", "assets", "passwd")); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "notdir", md("notdir"), map[string]string{"scripts": "a file"})
	big := writeSkill(t, root, "big", md("big"), map[string]string{})
	if err := os.MkdirAll(filepath.Join(big, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(big, "assets", "huge.bin"), make([]byte, skills.MaxTotalBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "longmd", md("longmd")+strings.Repeat("x", skills.MaxSkillFileBytes), map[string]string{})

	for _, tc := range []struct {
		name   string
		target error
		want   []string
	}{
		{"missing", skills.ErrNotFound, []string{filepath.Join(root, "missing", "SKILL.md"), "no such file"}},
		{"other", skills.ErrInvalid, []string{filepath.Join(root, "other", "SKILL.md") + ":2: name: \"not-other\" does not match its folder \"other\""}},
		{"linked", skills.ErrInvalid, []string{"passwd is a symbolic link"}},
		{"notdir", skills.ErrInvalid, []string{"scripts: want a folder"}},
		{"big", skills.ErrTooLarge, []string{"pass 8 MiB", "huge.bin"}},
		{"longmd", skills.ErrTooLarge, []string{"SKILL.md is over 64 KiB"}},
		{"../etc", skills.ErrInvalid, []string{`skill name "../etc"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := skills.Load(root, tc.name)
			if !errors.Is(err, tc.target) {
				t.Fatalf("err = %v, want %v", err, tc.target)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestListAndCreate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "skills")
	if _, err := skills.List(root); !errors.Is(err, skills.ErrNotFound) || !strings.Contains(err.Error(), "starter skill new") {
		t.Errorf("List of a missing folder: %v", err)
	}
	dir, err := skills.Create(root, "release-notes")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, kind := range skills.Kinds {
		if fi, err := os.Stat(filepath.Join(dir, kind)); err != nil || !fi.IsDir() {
			t.Errorf("%s/ not created: %v", kind, err)
		}
	}
	if _, err := skills.Create(root, "release-notes"); !errors.Is(err, skills.ErrExist) {
		t.Errorf("second Create: %v, want ErrExist", err)
	}
	if _, err := skills.Create(root, "Bad Name"); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("Create with a bad name: %v", err)
	}
	if _, err := skills.Create(root, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "empty-folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := skills.List(root)
	if !errors.Is(err, skills.ErrNotFound) || !strings.Contains(err.Error(), filepath.Join("empty-folder", "SKILL.md")) {
		t.Errorf("List error = %v, want the folder without SKILL.md named", err)
	}
	if len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "release-notes" {
		t.Fatalf("List = %+v", list)
	}
	s := list[1]
	if !strings.Contains(s.Body, "# Release Notes") || len(s.Files) != 0 || s.Description == "" {
		t.Errorf("skeleton = %+v (hidden .keep files must not count)", s)
	}
}

func TestPrompt(t *testing.T) {
	s := skills.Skill{Name: "kit", Description: "Makes\n  reports.", Body: "Do it.\n", License: "MIT",
		AllowedTools: []string{"Bash"}, Compatibility: "needs sh"}
	want := "Skill kit: Makes reports.\n\nDo it.\n\nCompatibility: needs sh"
	if got := s.Prompt(); got != want {
		t.Errorf("prompt:\n%q\nwant\n%q", got, want)
	}
	s.Files = []skills.File{{Path: "scripts/a.sh"}}
	s.Compatibility = "  "
	got := s.Prompt()
	if !strings.Contains(got, "under skills/kit/ (the skill's scripts/run.sh is skills/kit/scripts/run.sh there).\n\nDo it.") || strings.Contains(got, "Compatibility") {
		t.Errorf("prompt with files and a blank compatibility:\n%s", got)
	}
	if strings.Contains(got, "MIT") || strings.Contains(got, "Bash") {
		t.Errorf("license or allowed-tools reached the prompt:\n%s", got)
	}
}

// TestExampleSkills keeps the repository's example skills loadable.
func TestExampleSkills(t *testing.T) {
	list, err := skills.List(filepath.Join("..", "examples", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no example skills")
	}
	for _, s := range list {
		var hasBinary, hasScript bool
		for _, f := range s.Files {
			hasBinary = hasBinary || bytes.ContainsAny(f.Data, "\x00")
			hasScript = hasScript || (strings.HasPrefix(f.Path, "scripts/") && f.Executable)
		}
		if s.Name == "report-kit" && (!hasBinary || !hasScript) {
			t.Errorf("report-kit should show a binary asset and an executable script: %+v", s.Files)
		}
	}
}
