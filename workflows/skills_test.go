package workflows

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/permissions"
)

const kitPrompt = "Skill kit: Makes reports.\nIts files are in the workspace under skills/kit/ (the skill's scripts/run.sh is skills/kit/scripts/run.sh there).\n\nRun scripts/make.sh."

// skillFakes are the skill and requirement activities, recording every call in order
// (shared with the model and tool fakes through order).
type skillFakes struct {
	order       *[]string
	loads       []api.LoadSkillsRequest
	copies      []api.MaterializeSkillsRequest
	probes      []api.ProbeSandboxRequest
	unmet       []string
	noFileSkill bool
}

func (f *skillFakes) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, req api.LoadSkillsRequest) (api.LoadSkillsResult, error) {
		*f.order = append(*f.order, "load")
		f.loads = append(f.loads, req)
		var res api.LoadSkillsResult
		for _, name := range req.Names {
			s := api.LoadedSkill{Name: name, Description: "Makes reports.", Prompt: kitPrompt, StoreRun: req.RunID}
			if name != "kit" {
				s.Prompt = "Skill " + name + ": other.\n\nBody of " + name + "."
			}
			if !f.noFileSkill || name == "kit" {
				s.Dir = "skills/" + name
				s.Files = []api.SkillFile{{Path: "scripts/make.sh", Size: 3, SHA256: "abc", Executable: true}}
			}
			res.Skills = append(res.Skills, s)
		}
		return res, nil
	}, activity.RegisterOptions{Name: api.ActivityLoadSkills})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.MaterializeSkillsRequest) (api.MaterializeSkillsResult, error) {
		*f.order = append(*f.order, "materialize")
		f.copies = append(f.copies, req)
		return api.MaterializeSkillsResult{Written: []string{"skills/kit/scripts/make.sh"}}, nil
	}, activity.RegisterOptions{Name: api.ActivityMaterializeSkills})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.ProbeSandboxRequest) (api.ProbeSandboxResult, error) {
		*f.order = append(*f.order, "probe")
		f.probes = append(f.probes, req)
		return api.ProbeSandboxResult{Locale: "POSIX", Commands: map[string]api.CommandInfo{}, Unmet: f.unmet}, nil
	}, activity.RegisterOptions{Name: api.ActivityProbeSandbox})
}

// orderedModel wraps agentFakes' model so calls land in order.
func registerOrderedAgent(env *testsuite.TestWorkflowEnvironment, f *agentFakes, order *[]string) {
	f.register(env)
	env.RegisterActivityWithOptions(fullThread(func(_ context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
		*order = append(*order, "model")
		f.requests = append(f.requests, req)
		n := 0
		for _, m := range req.Messages {
			if m.Role == api.RoleAssistant {
				n++
			}
		}
		return api.CompleteChatResult{Message: f.script[n], Model: "fake"}, nil
	}), activity.RegisterOptions{Name: api.ActivityCompleteChat})
	env.RegisterActivityWithOptions(func(_ context.Context, req api.RunToolRequest) (api.RunToolResult, error) {
		*order = append(*order, "tool")
		f.tools = append(f.tools, req)
		return api.RunToolResult{Content: "ok"}, nil
	}, activity.RegisterOptions{Name: api.ActivityRunTool})
}

// wantSkillsOnce checks that every request carries the skill texts exactly as recorded,
// once, beside the instructions, and that no message of the thread repeats them.
func wantSkillsOnce(t *testing.T, reqs []api.CompleteChatRequest, instructions string, skills ...string) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatal("no model requests")
	}
	for i, r := range reqs {
		if r.System != instructions {
			t.Errorf("request %d: system = %q, want the instructions %q only", i+1, r.System, instructions)
		}
		if !slices.Equal(r.Skills, skills) {
			t.Errorf("request %d: skills = %q, want %q", i+1, r.Skills, skills)
		}
		for _, m := range r.Messages {
			if m.Role == api.RoleSystem || strings.Contains(m.Content, "Skill ") {
				t.Errorf("request %d: the thread holds a system or skill text: %+v", i+1, m)
			}
		}
	}
}

// TestAgentSkillsReachEveryRequestOnce: the skills are loaded (a checkpoint) and copied
// before the first turn; every model request, also after a suspension for an approval,
// carries their recorded texts once, never in the thread.
func TestAgentSkillsReachEveryRequestOnce(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "reporter", Instructions: "You write reports.", Skills: []string{"kit", "style"},
		SkillFiles: api.SkillFilesSkipSame, Permissions: permissions.Policy{Mode: permissions.ModeApprove}}
	var order []string
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"sh skills/kit/scripts/make.sh"}`)),
		text("Done."),
	}}
	registerOrderedAgent(env, f, &order)
	sf := &skillFakes{order: &order, noFileSkill: true}
	sf.register(env)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reporter"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "load,materialize,model,tool,model" {
		t.Errorf("activities = %s, want the skills loaded and copied before the first turn", got)
	}
	wantSkillsOnce(t, f.requests, "You write reports.", kitPrompt, "Skill style: other.\n\nBody of style.")
	if len(sf.loads) != 1 || strings.Join(sf.loads[0].Names, ",") != "kit,style" {
		t.Errorf("loads = %+v", sf.loads)
	}
	// Only the skill with files is copied, with the manifest and not the text.
	c := sf.copies[0]
	if len(c.Skills) != 1 || c.Skills[0].Name != "kit" || c.Skills[0].Prompt != "" || c.Mode != api.SkillFilesSkipSame || c.Skills[0].StoreRun == "" {
		t.Errorf("copy request = %+v", c)
	}
	rec := queryRecord(t, env)
	if _, ok := rec.State["skills:kit,style"]; !ok {
		t.Errorf("the loaded skills are not recorded: state keys %v", sortedKeys(rec.State))
	}
	if countEvents(rec, "skills_materialized") != 1 || countEvents(rec, "sandbox_probed") != 0 {
		t.Errorf("events: %d skills_materialized, %d sandbox_probed", countEvents(rec, "skills_materialized"), countEvents(rec, "sandbox_probed"))
	}
}

// TestDockerSkillsCopiedAgainAfterPark: a docker sandbox parked during a long wait is a
// fresh container afterwards; the skills' files are copied into it again before the
// approved call runs, and the model requests still carry the texts once.
func TestDockerSkillsCopiedAgainAfterPark(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	// Runs recorded before host queues (hostq.go) keep worker sessions.
	env.OnGetVersion(ChangeHostQueue, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	spec := agents.Spec{Name: "boxed", Instructions: "Boxed.", Skills: []string{"kit"}, Permissions: permissions.Policy{Mode: permissions.ModeApprove},
		Requires: api.Requirements{Commands: map[string]string{"sh": "*"}},
		Sandbox:  api.SandboxSpec{Type: api.SandboxDocker, IdleTimeout: api.Duration(time.Minute)}}
	var order []string
	f := &agentFakes{spec: spec, script: []api.ChatMessage{
		toolReply(call("shell", `{"command":"sh skills/kit/scripts/make.sh"}`)),
		text("done"),
	}}
	registerOrderedAgent(env, f, &order)
	sf := &skillFakes{order: &order}
	sf.register(env)
	registerParkRestore(env, &order)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalApproval, api.ApprovalSignal{CallID: "1.1", Approved: true})
	}, time.Hour)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "boxed"))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := "probe,load,materialize,model,park,restore,materialize,tool,model"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("activities:\n got %s\nwant %s", got, want)
	}
	if len(sf.copies) != 2 || sf.copies[1].Skills[0].Files[0].SHA256 != "abc" || sf.copies[1].Sandbox.Type != api.SandboxDocker {
		t.Errorf("copies = %+v", sf.copies)
	}
	wantSkillsOnce(t, f.requests, "Boxed.", kitPrompt)
	rec := queryRecord(t, env)
	var whens []string
	for _, e := range rec.Events {
		if e.Type == "skills_materialized" {
			whens = append(whens, string(e.Data))
		}
	}
	if len(whens) != 2 || !strings.Contains(whens[0], `"when":"start"`) || !strings.Contains(whens[1], `"when":"restore"`) {
		t.Errorf("skills_materialized events = %v", whens)
	}
	if len(sf.probes) != 1 {
		t.Errorf("probes = %d, want 1 (once per run, not again after the restore)", len(sf.probes))
	}
}

// TestRequirementsUnmetFailWithEveryItem: a sandbox that falls short fails the run before
// any model call, with every unmet item in the error.
func TestRequirementsUnmetFailWithEveryItem(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "py", Skills: []string{"kit"},
		Requires: api.Requirements{Commands: map[string]string{"python3": ">=3.10"}, Locale: "utf8"}}
	var order []string
	f := &agentFakes{spec: spec, script: []api.ChatMessage{text("never")}}
	registerOrderedAgent(env, f, &order)
	sf := &skillFakes{order: &order, unmet: []string{"python3 missing", "locale is POSIX, want utf8"}}
	sf.register(env)
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "py"))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "agent py cannot run in its local sandbox: python3 missing; locale is POSIX, want utf8") {
		t.Fatalf("err = %v", err)
	}
	if got := strings.Join(order, ","); got != "probe" {
		t.Errorf("activities = %s, want only the probe: no skills copied, no model call", got)
	}
	if req := sf.probes[0].Requires; req.Locale != "utf8" || req.Commands["python3"] != ">=3.10" {
		t.Errorf("probe request = %+v", sf.probes[0])
	}
	rec := queryRecord(t, env)
	if rec.Status != api.StatusFailed || countEvents(rec, "sandbox_probed") != 1 || countEvents(rec, "agent_start") != 0 {
		t.Errorf("status %s; events %+v", rec.Status, rec.Events)
	}
}

// TestSessionSkillsOncePerRequest: in a session the skills are prepared on the first
// prompt only, and every request of every turn carries them once, never the thread.
func TestSessionSkillsOncePerRequest(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	m := &echoModel{}
	spec := sessionSpec
	spec.Skills = []string{"kit"}
	spec.Requires = api.Requirements{Locale: "utf8"}
	m.register(env, spec)
	var order []string
	sf := &skillFakes{order: &order}
	sf.register(env)
	var out []promptResult
	prompt(env, time.Minute, "My name is Mac.", &out)
	prompt(env, time.Hour, "What is my name?", &out)
	closeSession(env, 2*time.Hour)
	env.ExecuteWorkflow(api.WorkflowSession, sessionInput(t, api.SessionInput{Agent: "assistant", Instance: "u1"}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].err != nil || out[1].err != nil || out[1].reply.Reply != "Your name is Mac" {
		t.Fatalf("replies = %+v (errors %v, %v)", out, out[0].err, out[1].err)
	}
	if got := strings.Join(order, ","); got != "probe,load,materialize" {
		t.Errorf("skill activities = %s, want them once for the session run", got)
	}
	wantSkillsOnce(t, m.requests, "Be brief.", kitPrompt)
}

// TestRerunKeepsTheRecordedSkills: a re-run seeded from a failed run uses that run's
// skill snapshot (text and files) instead of loading the skills again from disk.
func TestRerunKeepsTheRecordedSkills(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	spec := agents.Spec{Name: "reporter", Skills: []string{"kit"}}
	var order []string
	f := &agentFakes{spec: spec, script: []api.ChatMessage{text("ok")}}
	registerOrderedAgent(env, f, &order)
	sf := &skillFakes{order: &order}
	sf.register(env)
	old := api.LoadSkillsResult{Skills: []api.LoadedSkill{{Name: "kit", Prompt: "Skill kit: as recorded.\n\nOld body.",
		Dir: "skills/kit", StoreRun: "old-run", Files: []api.SkillFile{{Path: "scripts/make.sh", SHA256: "old"}}}}}
	seed := map[string]json.RawMessage{"agent": payload(t, spec), "skills:kit": payload(t, old)}
	env.ExecuteWorkflow(api.WorkflowAgentRun, agentInput(t, "reporter"), &api.RunOptions{Seed: seed, RerunOf: "old-run"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "materialize,model" {
		t.Errorf("activities = %s, want no new load", got)
	}
	if sf.copies[0].Skills[0].StoreRun != "old-run" || sf.copies[0].Skills[0].Files[0].SHA256 != "old" {
		t.Errorf("copy = %+v, want the old run's snapshot", sf.copies[0])
	}
	wantSkillsOnce(t, f.requests, "", "Skill kit: as recorded.\n\nOld body.")
}
