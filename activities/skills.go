package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/skills"
)

// Register registers the tool, skill and requirement activities.
func (a *Tools) Register(r Registry) {
	a.RegisterSandbox(r)
	r.RegisterActivityWithOptions(a.LoadSkills, activity.RegisterOptions{Name: api.ActivityLoadSkills})
}

// RegisterSandbox registers the tool activities a run sends to its host queue: all but
// LoadSkills, which reads the worker's skills_path, not the run's sandbox.
func (a *Tools) RegisterSandbox(r Registry) {
	for name, fn := range map[string]any{
		api.ActivityRunTool:           a.RunTool,
		api.ActivityCollectOutputs:    a.CollectOutputs,
		api.ActivityRestoreArtifacts:  a.RestoreArtifacts,
		api.ActivityMaterializeSkills: a.MaterializeSkills,
		api.ActivityProbeSandbox:      a.ProbeSandbox,
		api.ActivityHarnessStep:       a.HarnessStep,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// legacySkillFileName is where runs recorded before skill files became blobs keep a
// file's bytes: the artifact <StoreRun>/__skillfile.<sha256>. Kept so those runs still
// materialise their skills after an upgrade.
func legacySkillFileName(sum string) string { return "__skillfile." + sum }

// LoadSkills reads the named skills from the worker's skills_path and returns what the run
// records: each skill's prompt text and a manifest of its files. The files' bytes go to
// the blob store, named by their sha256 (which the manifest records), so the recorded
// snapshot (not whatever is on disk later) is what the run's sandbox gets, from any
// worker, also when it is materialised again days later; a file shared by two skills or
// loaded by many runs is kept once.
func (a *Tools) LoadSkills(ctx context.Context, req api.LoadSkillsRequest) (api.LoadSkillsResult, error) {
	var out api.LoadSkillsResult
	for _, name := range req.Names {
		s, err := skills.Load(a.skillsPath, name)
		switch {
		case errors.Is(err, skills.ErrNotFound):
			return api.LoadSkillsResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("load skill %s: %v", name, err), api.ErrTypeNotFound, nil)
		case errors.Is(err, skills.ErrInvalid), errors.Is(err, skills.ErrTooLarge):
			return api.LoadSkillsResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("load skill %s: %v", name, err), api.ErrTypeBadInput, nil)
		case err != nil:
			return api.LoadSkillsResult{}, fmt.Errorf("load skill %s: %w", name, err)
		}
		ls := api.LoadedSkill{Name: s.Name, Description: s.Description, Compatibility: s.Compatibility,
			Prompt: s.Prompt()}
		if len(s.Files) > 0 {
			ls.Dir = s.SandboxDir()
		}
		for _, f := range s.Files {
			sum, err := a.store.PutBlob(ctx, f.Data)
			if err != nil {
				return api.LoadSkillsResult{}, fmt.Errorf("load skill %s: keep %s: %w", name, f.Path, err)
			}
			ls.Files = append(ls.Files, api.SkillFile{Path: f.Path, Size: int64(len(f.Data)), SHA256: sum, Executable: f.Executable})
		}
		out.Skills = append(out.Skills, ls)
	}
	return out, nil
}

// skillFile returns the bytes of the skill file named sum: the blob, or for a run recorded
// before skill files were blobs, the artifact storeRun/__skillfile.<sum>. Either way the
// bytes are checked against sum (artifacts.ErrChecksum).
func (a *Tools) skillFile(ctx context.Context, storeRun, sum string) ([]byte, error) {
	data, err := a.store.GetBlob(ctx, sum)
	if !errors.Is(err, artifacts.ErrNotFound) {
		return data, err
	}
	data, legacyErr := a.store.Get(ctx, storeRun, legacySkillFileName(sum))
	if errors.Is(legacyErr, artifacts.ErrNotFound) {
		return nil, err // report the blob, where every new manifest's bytes are
	}
	if legacyErr != nil {
		return nil, legacyErr
	}
	if artifacts.Sum(data) != sum {
		return nil, fmt.Errorf("skill file %s of run %s: %w", sum, storeRun, artifacts.ErrChecksum)
	}
	return data, nil
}

// MaterializeSkills copies the recorded files of the skills into the run's sandbox, under
// each skill's folder (skills/<name>/scripts/...), byte for byte, and makes the executable
// ones executable when the sandbox has a shell. With mode skip_same a file the sandbox
// already holds with the same bytes is left alone. Writing is idempotent, so a retry is
// harmless.
func (a *Tools) MaterializeSkills(ctx context.Context, req api.MaterializeSkillsRequest) (api.MaterializeSkillsResult, error) {
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return api.MaterializeSkillsResult{}, classify(fmt.Errorf("materialize skills: %w", err))
	}
	var (
		res  api.MaterializeSkillsResult
		exec []string
	)
	for _, s := range req.Skills {
		if len(s.Files) == 0 {
			continue
		}
		dir := s.Dir
		if dir == "" {
			dir = path.Join(api.SkillsDir, s.Name)
		}
		storeRun := s.StoreRun
		if storeRun == "" {
			storeRun = req.RunID
		}
		for _, f := range s.Files {
			target := path.Join(dir, f.Path)
			if !strings.HasPrefix(target, api.SkillsDir+"/") {
				return res, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("materialize skill %s: %q leaves the skills folder", s.Name, f.Path), api.ErrTypeBadInput, nil)
			}
			data, err := a.skillFile(ctx, storeRun, f.SHA256)
			if errors.Is(err, artifacts.ErrChecksum) {
				return res, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("materialize skill %s: %s: the stored copy does not match its recorded sha256 (store changed or corrupt)", s.Name, f.Path),
					api.ErrTypeBadInput, nil)
			}
			if err != nil {
				return res, classify(fmt.Errorf("materialize skill %s: %s: %w", s.Name, f.Path, err))
			}
			if req.Mode == api.SkillFilesSkipSame {
				if have, err := sb.Read(ctx, target); err == nil && bytes.Equal(have, data) {
					res.Skipped = append(res.Skipped, target)
					continue
				}
			}
			if _, err := sb.Write(ctx, target, data); err != nil {
				return res, classify(fmt.Errorf("materialize skill %s: write %s: %w", s.Name, target, err))
			}
			res.Written = append(res.Written, target)
			if f.Executable {
				exec = append(exec, target)
			}
		}
	}
	if len(exec) > 0 {
		if err := chmodExec(ctx, sb, exec); err != nil {
			return res, err
		}
	}
	return res, nil
}

// chmodExec sets the execute bits of paths through the sandbox's shell; a sandbox without
// one (virtual) has no programs to run, so nothing is lost there.
func chmodExec(ctx context.Context, sb sandbox.Sandbox, paths []string) error {
	var cmd strings.Builder
	cmd.WriteString("chmod +x --")
	for _, p := range paths {
		cmd.WriteString(" " + sandbox.ShellQuote(p))
	}
	r, err := sb.Shell(ctx, cmd.String(), 30*time.Second)
	if errors.Is(err, sandbox.ErrNoShell) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("materialize skills: make scripts executable: %w", err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("materialize skills: make scripts executable: chmod exited %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
	}
	return nil
}

// probeTimeout bounds the requirements probe: a few `--version` calls.
const probeTimeout = 30 * time.Second

// ProbeSandbox checks an agent's requirements in the run's sandbox with one shell script:
// the locale ($LC_ALL, else $LC_CTYPE, else $LANG) and, for each required command, where
// `command -v` finds it and the first line of `<cmd> --version`. It returns what it found
// and every requirement not met. A sandbox without a shell cannot be probed: that is a
// non-retryable error, as is a probe that cannot run at all.
func (a *Tools) ProbeSandbox(ctx context.Context, req api.ProbeSandboxRequest) (api.ProbeSandboxResult, error) {
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return api.ProbeSandboxResult{}, classify(fmt.Errorf("probe sandbox: %w", err))
	}
	names := make([]string, 0, len(req.Requires.Commands))
	for n := range req.Requires.Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	r, err := sb.Shell(ctx, probeScript(names), probeTimeout)
	if errors.Is(err, sandbox.ErrNoShell) {
		return api.ProbeSandboxResult{}, temporal.NewNonRetryableApplicationError(
			"probe sandbox: could not inspect the sandbox: it has no shell (a virtual sandbox); use a local or docker sandbox, or drop requires",
			api.ErrTypeBadInput, nil)
	}
	if err != nil {
		return api.ProbeSandboxResult{}, classify(fmt.Errorf("probe sandbox: %w", err))
	}
	if r.TimedOut || r.ExitCode != 0 {
		return api.ProbeSandboxResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("probe sandbox: could not inspect the sandbox (exit %d, timed out %v): %s", r.ExitCode, r.TimedOut, strings.TrimSpace(r.Stderr)),
			api.ErrTypeBadInput, nil)
	}
	res := parseProbe(r.Stdout)
	res.Unmet = agents.Unmet(req.Requires, res)
	return res, nil
}

// probeScript prints "locale=<value>" and, per command found, "cmd=<name>\t<path>\t<first
// line of --version>". Names are validated (agents.Spec) and quoted anyway. stdin is
// /dev/null so a program that does not know --version cannot wait for input.
func probeScript(names []string) string {
	var b strings.Builder
	b.WriteString(`printf 'locale=%s\n' "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}"` + "\n")
	if len(names) > 0 {
		b.WriteString("for c in")
		for _, n := range names {
			b.WriteString(" " + sandbox.ShellQuote(n))
		}
		b.WriteString(`; do
  p=$(command -v "$c" 2>/dev/null) || continue
  v=$("$c" --version </dev/null 2>&1 | awk 'NF { print; exit }' | tr '\t' ' ')
  printf 'cmd=%s\t%s\t%s\n' "$c" "$p" "$v"
done
`)
	}
	b.WriteString("exit 0\n")
	return b.String()
}

func parseProbe(out string) api.ProbeSandboxResult {
	res := api.ProbeSandboxResult{Commands: map[string]api.CommandInfo{}}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "locale="):
			res.Locale = strings.TrimSpace(strings.TrimPrefix(line, "locale="))
		case strings.HasPrefix(line, "cmd="):
			parts := strings.SplitN(strings.TrimPrefix(line, "cmd="), "\t", 3)
			if len(parts) < 2 || parts[1] == "" {
				continue
			}
			info := api.CommandInfo{Path: parts[1]}
			if len(parts) == 3 {
				info.VersionLine = strings.TrimSpace(parts[2])
				info.Version = agents.ExtractVersion(info.VersionLine)
			}
			res.Commands[parts[0]] = info
		}
	}
	return res
}
