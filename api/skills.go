package api

import "fmt"

// Skill and environment activity names.
const (
	// ActivityLoadSkills reads an agent's skills from the worker's skills_path, keeps a
	// snapshot of their files in the artifact store and returns their texts and manifests
	// (recorded, so a skill changed on disk never changes a running workflow).
	ActivityLoadSkills = "LoadSkills"
	// ActivityMaterializeSkills copies recorded skill files into the run's sandbox.
	ActivityMaterializeSkills = "MaterializeSkills"
	// ActivityProbeSandbox checks an agent's requirements against its sandbox.
	ActivityProbeSandbox = "ProbeSandbox"
)

// Values of an agent's skill_files (how skill files reach the sandbox).
const (
	// SkillFilesCopy (the default) writes every file, replacing what is there.
	SkillFilesCopy = "copy"
	// SkillFilesSkipSame leaves a file the sandbox already holds with the same bytes (an
	// image with the skill baked in, a persistent workspace) and writes the others.
	SkillFilesSkipSame = "skip_same"
)

// SkillsDir is the workspace folder skill files are copied to: skills/<name>/scripts/...
const SkillsDir = "skills"

// LoadSkillsRequest names the skills to load, in the order their texts join the system
// prompt.
type LoadSkillsRequest struct {
	RunID string   `json:"run_id"`
	Names []string `json:"names"`
}

// SkillFile is one file of a skill, as recorded: its path relative to the skill's folder
// (scripts/x.py), size, SHA-256 and whether it is executable. The bytes stay in the
// artifact store, under the run that loaded the skill, named by their SHA-256.
type SkillFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	Executable bool   `json:"executable,omitempty"`
}

// LoadedSkill is a skill as a run recorded it.
type LoadedSkill struct {
	Name          string `json:"name"`
	Description   string `json:"description"`
	Compatibility string `json:"compatibility,omitempty"`
	// Prompt is the skill's contribution to the system prompt: a header naming it (and
	// where its files are), its Markdown body, and a "Compatibility:" line when declared.
	Prompt string `json:"prompt,omitempty"`
	// Dir is the workspace folder the files are copied to (skills/<name>).
	Dir   string      `json:"dir,omitempty"`
	Files []SkillFile `json:"files,omitempty"`
	// StoreRun is set only on skills recorded before skill files became blobs: the run
	// under which those file bytes are kept in the artifact store. Newer files are blobs
	// named by their SHA256, readable from any run.
	StoreRun string `json:"store_run,omitempty"`
}

// LoadSkillsResult is the recorded snapshot of an agent's skills.
type LoadSkillsResult struct {
	Skills []LoadedSkill `json:"skills"`
}

// MaterializeSkillsRequest copies the files of Skills into the run's sandbox, under each
// skill's Dir.
type MaterializeSkillsRequest struct {
	RunID   string        `json:"run_id"`
	Sandbox SandboxSpec   `json:"sandbox"`
	Skills  []LoadedSkill `json:"skills"`
	// Mode is SkillFilesCopy (or empty) or SkillFilesSkipSame.
	Mode string `json:"mode,omitempty"`
}

// MaterializeSkillsResult lists the workspace paths written and those left as they were
// (skip_same: the sandbox already held the same bytes).
type MaterializeSkillsResult struct {
	Written []string `json:"written,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
}

// Requirements are what an agent needs of its sandbox, checked once before its first
// turn: commands on PATH with optional version constraints, and a locale.
type Requirements struct {
	// Commands maps a command name to a version constraint: "" or "*" (present), or
	// comparisons joined by commas (">=3.10", ">=1.2, <2", "~>3.1", "=1.0", "!=2.0").
	Commands map[string]string `json:"commands,omitempty" mapstructure:"commands" yaml:"commands"`
	// Locale is "utf8" (any UTF-8 locale) or an exact locale name ("C.UTF-8"); empty:
	// no locale requirement.
	Locale string `json:"locale,omitempty" mapstructure:"locale" yaml:"locale"`
}

// IsZero reports whether nothing is required.
func (r Requirements) IsZero() bool { return len(r.Commands) == 0 && r.Locale == "" }

// ProbeSandboxRequest asks the ProbeSandbox activity to check Requires in the run's
// sandbox.
type ProbeSandboxRequest struct {
	RunID    string       `json:"run_id"`
	Sandbox  SandboxSpec  `json:"sandbox"`
	Requires Requirements `json:"requires"`
}

// CommandInfo is what the probe found of one command.
type CommandInfo struct {
	Path string `json:"path,omitempty"`
	// Version is the first dotted number of `<cmd> --version`; empty when unreadable.
	Version string `json:"version,omitempty"`
	// VersionLine is the first line `<cmd> --version` printed.
	VersionLine string `json:"version_line,omitempty"`
}

// ProbeSandboxResult is the sandbox's environment as probed, and every requirement it
// does not meet ("python3 missing", "locale is POSIX, want utf8"); empty Unmet: all met.
type ProbeSandboxResult struct {
	Commands map[string]CommandInfo `json:"commands,omitempty"`
	Locale   string                 `json:"locale,omitempty"`
	Unmet    []string               `json:"unmet,omitempty"`
}

// MaxSkillName is the longest skill name.
const MaxSkillName = 64

// ValidateSkillName checks a skill's name, which is also its folder under skills_path and
// under the workspace's skills/: 1-64 lowercase letters, digits, '-' and '_', starting and
// ending with a letter or digit.
func ValidateSkillName(name string) error {
	ok := name != "" && len(name) <= MaxSkillName
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		edge := i == 0 || i == len(name)-1
		ok = alnum || (!edge && (c == '-' || c == '_'))
	}
	if !ok {
		return fmt.Errorf("skill name %q: want 1-%d lowercase letters, digits, '-' and '_', starting and ending with a letter or digit", name, MaxSkillName)
	}
	return nil
}
