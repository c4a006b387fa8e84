package activities

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
)

// A pluggable loop (agents.Spec.Loop) takes the place of the model call of each turn:
// HarnessStep gets the CompleteChatRequest the model would have, rebuilds the thread as
// CompleteChat does (chatInput), hands the loop one start message (api.LoopRequest) and
// maps its answer (api.LoopStep) to the CompleteChatResult the workflow handles as a
// model's reply, stored in the thread the same way (chatReplied). A step is stateless:
// the loop gets the whole transcript every time, so a retry after a crash starts it
// afresh and the tool calls already in the thread never run again.

// Loop is a pluggable agent loop written in Go (another agent framework, say), registered
// on a worker by name (platform.WithLoop) and chosen by `loop: {type: go, name: N}`. Step
// is one turn: given the transcript so far it answers with text and either tool uses or
// a final answer. It must be safe for concurrent use and continue from the transcript
// alone (a step may run again on another worker). An error fails the step: retried for a
// plain error, at once for a non-retryable temporal.ApplicationError.
type Loop interface {
	Step(ctx context.Context, req api.LoopRequest) (api.LoopStep, error)
}

// LoopFunc makes a function a Loop.
type LoopFunc func(ctx context.Context, req api.LoopRequest) (api.LoopStep, error)

// Step calls f.
func (f LoopFunc) Step(ctx context.Context, req api.LoopRequest) (api.LoopStep, error) {
	return f(ctx, req)
}

// Loops are a worker's registered Go loops, by name.
type Loops map[string]Loop

// Names returns the registered names, sorted.
func (ls Loops) Names() []string {
	names := make([]string, 0, len(ls))
	for n := range ls {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrTypeHarness is the failure type of a harness step that failed in a way a retry may
// cure (the harness crashed or hung); the bad-input type marks what a retry cannot.
const ErrTypeHarness = "NexoHarnessFailed"

// HarnessStep runs one step of the agent's loop on the run's sandbox host.
func (a *Tools) HarnessStep(ctx context.Context, req api.CompleteChatRequest) (api.CompleteChatResult, error) {
	if req.Loop == nil {
		return api.CompleteChatResult{}, temporal.NewNonRetryableApplicationError(
			"harness step: the request names no loop", api.ErrTypeBadInput, nil)
	}
	loop := *req.Loop
	in, err := a.model.chatInput(ctx, req)
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	lreq := loopRequest(req, in)
	var step api.LoopStep
	switch loop.Type {
	case api.LoopGo:
		step, err = a.goStep(ctx, loop, lreq)
	case api.LoopHarness:
		step, err = a.harnessStep(ctx, req, loop, lreq)
	default:
		err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("loop type %q is not one of %s, %s", loop.Type, api.LoopHarness, api.LoopGo), api.ErrTypeBadInput, nil)
	}
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	out, err := stepResult(loop, step)
	if err != nil {
		return api.CompleteChatResult{}, err
	}
	return a.model.chatReplied(ctx, req, in, out)
}

// loopRequest is the start message of a step: the system prompt, the tools offered and
// the transcript (every content in full).
func loopRequest(req api.CompleteChatRequest, in chatIn) api.LoopRequest {
	lr := api.LoopRequest{Type: "start", Protocol: api.HarnessProtocol, RunID: req.RunID, Agent: req.Agent, Step: req.CallID,
		Instructions: in.system, Tools: []api.LoopTool{}, Transcript: []api.LoopEntry{}}
	for _, t := range in.cc.Tools {
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		lr.Tools = append(lr.Tools, api.LoopTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	for _, m := range in.thread {
		switch m.Role {
		case api.RoleAssistant:
			e := api.LoopEntry{Role: api.LoopRoleAssistant, Text: m.Content}
			for _, tc := range m.ToolCalls {
				args := json.RawMessage(tc.Arguments)
				if !json.Valid(args) {
					args, _ = json.Marshal(tc.Arguments) // as the harness sent it, a string
				}
				e.ToolUses = append(e.ToolUses, api.LoopToolUse{ID: tc.ID, Name: tc.Name, Arguments: args})
			}
			lr.Transcript = append(lr.Transcript, e)
		case api.RoleTool:
			lr.Transcript = append(lr.Transcript, api.LoopEntry{Role: api.LoopRoleTool, ToolUseID: m.ToolCallID, Text: m.Content,
				IsError: m.IsError || strings.HasPrefix(m.Content, "error: ")})
		default: // user messages, a compacted thread's summary
			if lr.Prompt == "" {
				lr.Prompt = m.Content
			}
			lr.Transcript = append(lr.Transcript, api.LoopEntry{Role: api.LoopRoleUser, Text: m.Content})
		}
	}
	return lr
}

// goStep runs a registered Go loop, bounded by the loop's timeout; a panic fails the step
// (non-retryably: the same transcript would panic again), naming the loop.
func (a *Tools) goStep(ctx context.Context, loop api.LoopSpec, req api.LoopRequest) (step api.LoopStep, err error) {
	l, ok := a.loops[loop.Name]
	if !ok {
		known := strings.Join(a.loops.Names(), ", ")
		if known == "" {
			known = "none"
		}
		return step, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"agent %s: no Go loop %q is registered on this worker (registered: %s); a worker built on package platform registers it with platform.WithLoop(%q, ...)",
			req.Agent, loop.Name, known, loop.Name), api.ErrTypeBadInput, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, loop.StepTimeout())
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s panicked: %v\n%s", loop.Describe(), r, clipBytes(string(debug.Stack()), 2000)),
				api.ErrTypeBadInput, nil)
		}
	}()
	step, err = l.Step(ctx, req)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return step, within(loop.Describe(), err)
		}
		if ctx.Err() == context.DeadlineExceeded {
			return step, temporal.NewApplicationError(fmt.Sprintf("%s: no answer within %s (loop.timeout): %v", loop.Describe(), loop.StepTimeout(), err), ErrTypeHarness)
		}
		return step, fmt.Errorf("%s: %w", loop.Describe(), err)
	}
	return step, nil
}

// harnessStep runs the harness program in the run's sandbox: the start message as one
// line on its stdin, its answer read from the JSON lines it prints on stdout.
func (a *Tools) harnessStep(ctx context.Context, req api.CompleteChatRequest, loop api.LoopSpec, lreq api.LoopRequest) (api.LoopStep, error) {
	name := loop.Describe()
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return api.LoopStep{}, classify(fmt.Errorf("%s: open the run's sandbox: %w", name, err))
	}
	ex, ok := sb.(sandbox.Execer)
	if !ok {
		return api.LoopStep{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s: a %s sandbox cannot run a harness (use sandbox type local or bubblewrap)", name, specTypeName(req.Sandbox.Type)), api.ErrTypeBadInput, nil)
	}
	start, err := json.Marshal(lreq)
	if err != nil {
		return api.LoopStep{}, fmt.Errorf("%s: encode the start message: %w", name, err)
	}
	var ro []string
	if strings.HasPrefix(loop.Command[0], "/") {
		ro = []string{loop.Command[0]}
	}
	opts := sandbox.ExecOptions{Stdin: append(start, '\n'), Timeout: loop.StepTimeout(),
		MaxStdout: api.MaxHarnessOutput, ReadOnly: ro, ReadOnlyWorkspace: true}
	if req.StreamLive {
		// A session's viewers see the step's text and thinking as the harness prints
		// them, through the attempt's heartbeat, as a model's streamed reply.
		live := startLiveText(ctx, req.StreamCall)
		defer live.stop()
		opts.OnStdout = (&liveLines{live: live}).write
	}
	res, err := ex.Exec(ctx, loop.Command, opts)
	if err != nil {
		if ctx.Err() != nil {
			return api.LoopStep{}, fmt.Errorf("%s: %w", name, err)
		}
		// It never started (no such file, not executable): a retry finds the same.
		return api.LoopStep{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v (loop.command %q)", name, err, loop.Command), api.ErrTypeBadInput, nil)
	}
	switch {
	case res.StdoutOverflow:
		return api.LoopStep{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s printed more than %d bytes (1 MiB, the cap of one step's output) on stdout and was killed", name, api.MaxHarnessOutput), api.ErrTypeTooLarge, nil)
	case res.TimedOut:
		return api.LoopStep{}, temporal.NewApplicationError(fmt.Sprintf(
			"%s did not finish its step within %s (loop.timeout) and was killed%s", name, loop.StepTimeout(), harnessStderr(res.Stderr)), ErrTypeHarness)
	case res.ExitCode != 0:
		return api.LoopStep{}, temporal.NewApplicationError(fmt.Sprintf("%s exited with code %d%s", name, res.ExitCode, harnessStderr(res.Stderr)), ErrTypeHarness)
	}
	step, err := ParseHarnessOutput(res.Stdout)
	if err != nil {
		return api.LoopStep{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v%s", name, err, harnessStderr(res.Stderr)), api.ErrTypeBadInput, nil)
	}
	return step, nil
}

func specTypeName(t string) string {
	if t == "" {
		return api.SandboxLocal
	}
	return t
}

// harnessStderr is the end of a harness's stderr for an error message, or "".
func harnessStderr(stderr string) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	const keep = 500
	if len(s) > keep {
		s = s[len(s)-keep:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		s = "…" + s
	}
	return "; stderr: " + s
}

// harnessLine is one line a harness prints: its type and the fields of every type.
type harnessLine struct {
	Type             string          `json:"type"`
	Text             *string         `json:"text"`
	Steps            []api.PlanStep  `json:"steps"`
	PromptTokens     int             `json:"prompt_tokens"`
	CompletionTokens int             `json:"completion_tokens"`
	TotalTokens      int             `json:"total_tokens"`
	ID               string          `json:"id"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
}

// ParseHarnessOutput reads what a harness printed in one step (docs/harness-protocol.md):
// JSON lines of type text, thinking, plan, usage, then one or more tool_use or one final.
// Blank lines are skipped; anything else is an error quoting the line.
func ParseHarnessOutput(stdout string) (api.LoopStep, error) {
	var step api.LoopStep
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxHarnessOutput+1)
	n := 0
	for sc.Scan() {
		n++
		raw := strings.TrimSpace(sc.Text())
		if raw == "" {
			continue
		}
		var l harnessLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			return step, fmt.Errorf("line %d is not a JSON object (%v): %s", n, err, quoteLine(raw))
		}
		if step.Final {
			return step, fmt.Errorf("line %d comes after the final line (a step ends with final): %s", n, quoteLine(raw))
		}
		text := ""
		if l.Text != nil {
			text = *l.Text
		}
		switch l.Type {
		case "text":
			step.Text += text
		case "thinking":
			step.Thinking += text
		case "plan":
			b, _ := json.Marshal(map[string]any{"steps": l.Steps})
			if l.Steps == nil {
				b = []byte(`{}`)
			}
			steps, err := agents.ParsePlan(string(b))
			if err != nil {
				return step, fmt.Errorf("line %d: plan: %v", n, err)
			}
			step.Plan = step.Plan[:0]
			for _, s := range steps {
				step.Plan = append(step.Plan, api.PlanStep{Step: s.Step, Status: s.Status})
			}
		case "usage":
			if l.PromptTokens < 0 || l.CompletionTokens < 0 || l.TotalTokens < 0 {
				return step, fmt.Errorf("line %d: usage has a negative count: %s", n, quoteLine(raw))
			}
			step.Usage.PromptTokens += l.PromptTokens
			step.Usage.CompletionTokens += l.CompletionTokens
			total := l.TotalTokens
			if total == 0 {
				total = l.PromptTokens + l.CompletionTokens
			}
			step.Usage.TotalTokens += total
		case "tool_use":
			if strings.TrimSpace(l.Name) == "" {
				return step, fmt.Errorf("line %d: tool_use has no name: %s", n, quoteLine(raw))
			}
			args := l.Arguments
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage(`{}`)
			}
			step.ToolUses = append(step.ToolUses, api.LoopToolUse{ID: l.ID, Name: l.Name, Arguments: args})
		case "final":
			if len(step.ToolUses) > 0 {
				return step, fmt.Errorf("line %d: final after tool_use (a step asks for tools or answers, not both): %s", n, quoteLine(raw))
			}
			step.Text += text
			step.Final = true
		case "":
			return step, fmt.Errorf("line %d has no \"type\": %s", n, quoteLine(raw))
		default:
			return step, fmt.Errorf("line %d has unknown type %q (want text, thinking, plan, usage, tool_use or final): %s", n, l.Type, quoteLine(raw))
		}
	}
	if err := sc.Err(); err != nil {
		return step, fmt.Errorf("read its output: %v", err)
	}
	if !step.Final && len(step.ToolUses) == 0 {
		return step, errors.New("it exited without a final or tool_use line (every step ends with one final, or asks for one or more tools)")
	}
	return step, nil
}

// quoteLine quotes a harness's line for an error, clipped to api.MaxHarnessLine bytes.
func quoteLine(s string) string {
	if len(s) > api.MaxHarnessLine {
		s = s[:api.MaxHarnessLine]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return fmt.Sprintf("%q…", s)
	}
	return fmt.Sprintf("%q", s)
}

// stepResult maps a loop's step to the reply the workflow handles as a model's: the text
// as content, the thinking as reasoning, each tool use as a tool call, the plan and the
// usage as they are.
func stepResult(loop api.LoopSpec, step api.LoopStep) (api.CompleteChatResult, error) {
	if !step.Final && len(step.ToolUses) == 0 {
		return api.CompleteChatResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s answered neither final nor a tool use", loop.Describe()), api.ErrTypeBadInput, nil)
	}
	if step.Final && len(step.ToolUses) > 0 {
		return api.CompleteChatResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s answered final and tool uses together (a step asks for tools or answers, not both)", loop.Describe()), api.ErrTypeBadInput, nil)
	}
	out := api.CompleteChatResult{Model: loop.Describe(), Usage: step.Usage, Reasoning: step.Thinking, Plan: step.Plan,
		Message: api.ChatMessage{Role: api.RoleAssistant, Content: step.Text}, FinishReason: "stop"}
	if len(step.ToolUses) > 0 {
		out.FinishReason = "tool_calls"
	}
	for i, u := range step.ToolUses {
		id := u.ID
		if id == "" {
			id = fmt.Sprintf("use-%d", i+1)
		}
		args := strings.TrimSpace(string(u.Arguments))
		if args == "" {
			args = "{}"
		}
		out.Message.ToolCalls = append(out.Message.ToolCalls, api.ToolCall{ID: id, Name: u.Name, Arguments: args})
	}
	return out, nil
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// liveLines splits a harness's stdout into lines as it arrives and publishes the text and
// thinking lines live; the step's result is still parsed from the whole output. A line
// longer than the step's output cap is not published (the step fails on it anyway).
type liveLines struct {
	live    *liveText
	partial []byte
}

func (l *liveLines) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(l.partial)+len(p) <= api.MaxHarnessOutput {
				l.partial = append(l.partial, p...)
			}
			return
		}
		line := append(l.partial, p[:i]...)
		l.partial, p = l.partial[:0], p[i+1:]
		var m struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch m.Type {
		case "text", "final": // a final line's text ends the reply (ParseHarnessOutput)
			l.live.add(m.Text)
		case "thinking":
			l.live.think(m.Text)
		}
	}
}
