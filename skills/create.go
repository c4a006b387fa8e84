package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// Create writes the skeleton of a new skill under root: root/name/SKILL.md (front matter
// with a placeholder description, a title and a process to fill in) and the folders
// scripts/, assets/ and references/, each with a .keep file so version control keeps them
// (hidden files are never part of a skill). It returns the skill's folder, and refuses to
// touch a skill that already exists.
func Create(root, name string) (string, error) {
	if err := api.ValidateSkillName(name); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dir := filepath.Join(root, name)
	file := filepath.Join(dir, FileName)
	if _, err := os.Lstat(file); err == nil {
		return "", fmt.Errorf("%w: %s", ErrExist, file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("create skill %s: %w", name, err)
	}
	for _, kind := range Kinds {
		if err := os.MkdirAll(filepath.Join(dir, kind), 0o755); err != nil {
			return "", fmt.Errorf("create skill %s: %w", name, err)
		}
		keep := filepath.Join(dir, kind, ".keep")
		if err := os.WriteFile(keep, nil, 0o644); err != nil {
			return "", fmt.Errorf("create skill %s: %w", name, err)
		}
	}
	// O_EXCL: never replace a SKILL.md written since the check above.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("create skill %s: %w", name, err)
	}
	if _, err := f.WriteString(Skeleton(name)); err != nil {
		f.Close()
		return "", fmt.Errorf("create skill %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("create skill %s: %w", name, err)
	}
	return dir, nil
}

// Skeleton is the SKILL.md Create writes for name. It loads as it is.
func Skeleton(name string) string {
	return fmt.Sprintf(`---
name: %[1]s
description: TODO what this skill does and when to use it (the model reads this first).
# compatibility: needs python3 3.10 or newer   (optional; shown to the model)
# license: Apache-2.0                          (optional; never shown to the model)
---

# %[2]s

TODO the instructions the agent follows when this skill applies.

## Process

1. TODO first step.
2. TODO second step.

## Files

The skill's files are in the workspace under skills/%[1]s/:
- scripts/: programs to run, e.g. `+"`sh skills/%[1]s/scripts/example.sh`"+`
- assets/: templates and other files to copy or fill in
- references/: documents to read when a step needs them
`, name, title(name))
}

// title turns "release-notes" into "Release Notes".
func title(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}
