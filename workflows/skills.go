package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// An agent with skills or requirements gets its sandbox ready before its first turn:
//
//  1. requires is probed once (ProbeSandbox); a sandbox that falls short fails the run
//     with every unmet item listed, before any model call: never a half-run;
//  2. the skills are loaded once (LoadSkills, a checkpoint): their texts and a manifest
//     of their files are recorded, and the bytes kept in the artifact store, so a skill
//     changed on disk never changes a running workflow, its replay or a re-run;
//  3. their files are copied into the sandbox (MaterializeSkills), and copied again
//     whenever a docker sandbox is re-created: after a park or a lost worker
//     (restoreOnNewHost), so the agent always finds them, as recorded.
//
// The texts reach the model through CompleteChatRequest.Skills on every request; the
// worker appends them to the system message after the instructions and the sandbox's own,
// so the stored thread never holds them and nothing is repeated across turns or resumes.
// An agent with neither skills nor requires runs none of these activities, so histories
// recorded before skills existed replay unchanged.

// setupOptions bound the probe, the load and the copy. They are explicit because a
// session prepares its agent inside an update handler, whose context has no options.
var setupOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 5 * time.Minute,
	HeartbeatTimeout:    ActivityHeartbeatTimeout,
	RetryPolicy:         defaultRetryPolicy(),
}

// prepareAgent readies the run's sandbox for spec and returns the skill texts its model
// requests carry.
func (rt *runtime) prepareAgent(ctx workflow.Context, spec agents.Spec) ([]string, error) {
	if len(spec.Skills) == 0 && spec.Requires.IsZero() {
		return nil, nil
	}
	if !spec.Requires.IsZero() {
		if err := rt.probeRequirements(ctx, spec); err != nil {
			return nil, err
		}
	}
	if len(spec.Skills) == 0 {
		return nil, nil
	}
	// A checkpoint, so the recorded snapshot is also what a re-run seeded from this run
	// uses.
	cctx := workflow.WithActivityOptions(ctx, setupOptions)
	loaded, err := Checkpoint[api.LoadSkillsResult](cctx, "skills:"+strings.Join(spec.Skills, ","),
		api.ActivityLoadSkills, api.LoadSkillsRequest{RunID: rt.rec.ID, Names: spec.Skills})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", spec.Name, err)
	}
	prompts := make([]string, 0, len(loaded.Skills))
	req := api.MaterializeSkillsRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox, Mode: spec.SkillFiles}
	for _, s := range loaded.Skills {
		prompts = append(prompts, s.Prompt)
		if len(s.Files) > 0 {
			s.Prompt = "" // the copy needs the manifest, not the text
			req.Skills = append(req.Skills, s)
		}
	}
	if len(req.Skills) > 0 {
		if rt.skillFiles == nil {
			rt.skillFiles = map[string]api.MaterializeSkillsRequest{}
		}
		rt.skillFiles[spec.Name] = req
		var res api.MaterializeSkillsResult
		if err := rt.onSandbox(ctx, &setupOptions, api.ActivityMaterializeSkills, req, &res); err != nil {
			return nil, wrap(err, "agent %s: copy skill files into the sandbox", spec.Name)
		}
		rt.emit(ctx, "skills_materialized", skillsEvent(req, res, "start"))
	}
	return prompts, nil
}

// probeRequirements checks spec.Requires in the run's sandbox, once per agent and run.
func (rt *runtime) probeRequirements(ctx workflow.Context, spec agents.Spec) error {
	if rt.probed[spec.Name] {
		return nil
	}
	req := api.ProbeSandboxRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox, Requires: spec.Requires}
	var res api.ProbeSandboxResult
	if err := rt.onSandbox(ctx, &setupOptions, api.ActivityProbeSandbox, req, &res); err != nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent %s: check requires: %s", spec.Name, errorMessage(err)), api.ErrTypeRequirements, temporalCause(err))
	}
	unmet := res.Unmet
	if unmet == nil {
		unmet = []string{}
	}
	rt.emit(ctx, "sandbox_probed", map[string]any{"agent": spec.Name, "commands": res.Commands, "locale": res.Locale, "unmet": unmet})
	if len(res.Unmet) > 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent %s cannot run in its %s sandbox: %s. Provision the sandbox (its image, PATH or env), or change the agent's requires",
				spec.Name, sandboxKind(rt.sandbox), strings.Join(res.Unmet, "; ")),
			api.ErrTypeRequirements, nil)
	}
	if rt.probed == nil {
		rt.probed = map[string]bool{}
	}
	rt.probed[spec.Name] = true
	return nil
}

func sandboxKind(s api.SandboxSpec) string {
	switch s.Type {
	case "":
		return api.SandboxLocal
	case api.SandboxDocker:
		image := s.Image
		if image == "" {
			image = "default image"
		}
		return fmt.Sprintf("docker (%s)", image)
	}
	return s.Type
}

// rematerializeSkills copies the recorded skill files again into a re-created sandbox, on
// the new host's session sctx. A failure is an event: the run goes on (a parked workspace
// that was restored holds the files already).
func (rt *runtime) rematerializeSkills(ctx, sctx workflow.Context) {
	names := make([]string, 0, len(rt.skillFiles))
	for name := range rt.skillFiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		req := rt.skillFiles[name]
		var res api.MaterializeSkillsResult
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(sctx, setupOptions), api.ActivityMaterializeSkills, req).Get(ctx, &res); err != nil {
			rt.emit(ctx, "skills_materialize_failed", map[string]string{"agent": name, "error": errorMessage(err)})
			continue
		}
		rt.emit(ctx, "skills_materialized", skillsEvent(req, res, "restore"))
	}
}

func skillsEvent(req api.MaterializeSkillsRequest, res api.MaterializeSkillsResult, when string) map[string]any {
	names := make([]string, 0, len(req.Skills))
	for _, s := range req.Skills {
		names = append(names, s.Name)
	}
	return map[string]any{"skills": names, "dir": api.SkillsDir, "written": len(res.Written), "skipped": len(res.Skipped), "when": when}
}
