package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
)

// sessionHistoryBound: a session continues as new when its history passes this many
// events (or when Temporal suggests it), well before Temporal's 51,200-event limit.
const sessionHistoryBound = 10_000

// sessionSegmentBytes bounds one archived segment of a session's stream (see archive). It
// decides how many segment artifacts a continue-as-new writes, so it is part of the
// workflow's commands: a constant, never a worker's setting (a test runs runSession with
// another).
const sessionSegmentBytes = 512 << 10

// ErrSessionContinuing is the message of the refusal a prompt gets while a session hands
// over to its continue-as-new run. Clients match the refusal by its type,
// api.ErrTypeSessionHandover (see handoverError), never by this text, and retry it.
const ErrSessionContinuing = "session is continuing as new; retry the prompt"

// handoverError is the typed refusal of a prompt during a handover, with an
// api.SessionHandover detail naming the run that refused it.
func handoverError(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	return temporal.NewApplicationErrorWithOptions(ErrSessionContinuing, api.ErrTypeSessionHandover,
		temporal.ApplicationErrorOptions{Details: []any{api.SessionHandover{
			Session: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}}})
}

// session is the state of one session run.
type session struct {
	in      api.SessionInput
	spec    agents.Spec
	carry   api.SessionCarry
	tools   *toolset
	conv    *conversation
	next    int // next ticket to hand out
	serving int // ticket being served
	closing bool
	// continuing is set while the run hands over to its continuation: new prompts are
	// refused (the client retries them; they land on the next run).
	continuing bool
	turnsHere  int
	// continueNow: this run's history grew past sessionHistoryBound; continue as new once idle.
	continueNow bool

	// skills are the agent's recorded skill texts, set with tools on the first prompt.
	skills []string
	// segmentBytes bounds one archived stream segment (sessionSegmentBytes).
	segmentBytes int

	// live is the turn in flight (nil between turns): what nexo.interrupt cancels and
	// nexo.steer hands messages to.
	live *liveTurn
}

// liveTurn is the turn a session is serving.
type liveTurn struct {
	n int
	// cancel ends the turn's context: its model or tool call in flight is cancelled.
	cancel      workflow.CancelFunc
	interrupted bool
	// steers are the messages nexo.steer handed over that no model call took yet; taken
	// counts those taken, so a steer knows whether its message went out.
	steers []string
	taken  int
}

// noTurnError is the refusal of an interrupt or a steer when no turn is running.
func (s *session) noTurnError(what string) error {
	return fmt.Errorf("session has no turn running (%d turns so far, none in progress): nothing to %s; send a prompt instead",
		s.carry.TurnCount(), what)
}

// Session is the workflow of one (agent, instance) pair: a remembering agent. Prompts
// arrive as the nexo.prompt update (update-with-start creates the session) and are served
// one at a time in arrival order; the thread lives in workflow state and is carried across
// continue-as-new; nexo.close ends it, releasing its sandbox and MCP clients, and returns
// the carry from which a reopened session starts. A session adds memory and an address,
// never authority: its sandbox, permissions, MCP servers and fetch allow-list are exactly
// the agent's.
func Session(ctx workflow.Context, in api.SessionInput) (api.SessionCarry, error) {
	return runSession(ctx, in, sessionSegmentBytes)
}

// runSession is Session with stream segments of at most segmentBytes.
func runSession(ctx workflow.Context, in api.SessionInput, segmentBytes int) (api.SessionCarry, error) {
	rt, err := runtimeOf(ctx, "session "+in.Agent+"/"+in.Instance)
	if err != nil {
		return api.SessionCarry{}, err
	}
	if in.Agent == "" || api.ValidateInstance(in.Instance) != nil {
		return api.SessionCarry{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("session needs an agent and a valid instance id (got %q, %q)", in.Agent, in.Instance), api.ErrTypeBadInput, nil)
	}
	s := &session{in: in, segmentBytes: segmentBytes}
	if in.Carry != nil {
		s.carry = *in.Carry
		rt.seqBase = s.carry.StreamOffset
		rt.rec.Artifacts = append(rt.rec.Artifacts, s.carry.Segments...)
		if len(s.carry.Approvals) > 0 {
			if err := json.Unmarshal(s.carry.Approvals, &rt.approvals); err != nil {
				return api.SessionCarry{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("session carry: approvals: %v", err), api.ErrTypeBadInput, nil)
			}
		}
		rt.stamps = s.carry.Stamps
		rt.restoreDecided(s.carry.Decided) // "already decided", across continue-as-new
		rt.restoreBudget(s.carry)
		rt.carryHost(s.carry.Host) // the sandbox's host, across continue-as-new (hostq.go)
		s.carry.Host = nil         // only a continue-as-new hands it on
	}
	s.carry.Runs++
	byRef := rt.threadVersion(ctx) >= 1
	s.conv = newConversation(byRef, s.carry.ThreadRef, s.carry.Thread, s.carry.Recent)
	if in.Fork != nil {
		s.startFork(ctx, rt, *in.Fork, byRef)
	}

	// Handlers first, so an update-with-start finds them on the first workflow task.
	if err := workflow.SetQueryHandler(ctx, api.QuerySession, func() (api.SessionView, error) { return s.view(rt), nil }); err != nil {
		return api.SessionCarry{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdatePrompt,
		func(ctx workflow.Context, req api.PromptRequest) (api.PromptReply, error) {
			return s.prompt(ctx, rt, req)
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req api.PromptRequest) error {
			if err := req.Validate(); err != nil {
				return err
			}
			if s.closing {
				return errors.New("session is closing; prompt again after it closed to reopen it")
			}
			if s.continuing {
				return handoverError(ctx)
			}
			return nil
		}}); err != nil {
		return api.SessionCarry{}, err
	}
	if err := workflow.SetUpdateHandler(ctx, api.UpdateClose, func(ctx workflow.Context) (api.SessionCarry, error) {
		s.closing = true
		// Close after the prompts already queued: they were accepted.
		if err := workflow.Await(ctx, func() bool { return s.serving == s.next }); err != nil {
			return api.SessionCarry{}, err
		}
		return s.snapshot(rt), nil
	}); err != nil {
		return api.SessionCarry{}, err
	}

	// Interrupt and steer act on the turn in flight; registering their handlers adds no
	// command, and a run that never receives them records none.
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateInterrupt,
		func(ctx workflow.Context) (api.InterruptReply, error) { return s.interrupt(ctx) },
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context) error {
			if s.live == nil {
				return s.noTurnError("interrupt")
			}
			if s.live.interrupted {
				return fmt.Errorf("turn %d is already being interrupted", s.live.n)
			}
			return nil
		}}); err != nil {
		return api.SessionCarry{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateSteer,
		func(ctx workflow.Context, req api.SteerRequest) (api.SteerReply, error) { return s.steer(ctx, req) },
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, req api.SteerRequest) error {
			if strings.TrimSpace(req.Text) == "" {
				return errors.New("steer text is empty")
			}
			if s.live == nil {
				return s.noTurnError("steer")
			}
			if s.live.interrupted {
				return fmt.Errorf("turn %d is being interrupted; send the message as a prompt", s.live.n)
			}
			return nil
		}}); err != nil {
		return api.SessionCarry{}, err
	}

	spec, err := Checkpoint[agents.Spec](ctx, "agent", api.ActivityResolveAgent, in.Agent)
	if err != nil {
		return api.SessionCarry{}, err
	}
	s.spec = spec
	rt.sandbox = spec.Sandbox
	rt.sandboxUsed = true

	for {
		err := workflow.Await(ctx, func() bool {
			idle := s.serving == s.next
			return (s.closing && idle) || (idle && s.shouldContinue())
		})
		if err != nil {
			return s.snapshot(rt), err
		}
		// Let in-flight handlers (the close update itself) return before this run ends.
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return s.snapshot(rt), err
		}
		if s.closing {
			if len(s.spec.MCP) > 0 {
				rt.closeMCP(ctx)
			}
			rt.emit(ctx, "session_closed", map[string]int{"turns": s.carry.TurnCount()})
			return s.snapshot(rt), nil
		}
		s.continuing = true
		carry, err := s.archive(ctx, rt)
		if err != nil {
			return carry, err
		}
		carry.Host = rt.hostCarry()
		next := s.in
		next.Carry = &carry
		next.Fork = s.forkCarry(rt)
		return api.SessionCarry{}, workflow.NewContinueAsNewError(ctx, api.WorkflowSession, json.RawMessage(mustJSON(next)))
	}
}

// startFork sets up a forked session (`starter session fork`): on its first run, the
// source's thread as the forked turn found it and a forked_from event; on every run until
// the sandbox is first used, the restore of the workspace that turn found. Only a fork's
// input has Fork, so no session started before forks takes this path.
func (s *session) startFork(ctx workflow.Context, rt *runtime, f api.SessionFork, byRef bool) {
	if s.in.Carry == nil {
		s.conv = newConversation(byRef, f.Thread, f.Messages, nil)
		rt.emit(ctx, "forked_from", map[string]any{"session": f.Session, "turn": f.Turn, "snapshot": f.Snapshot})
	}
	if f.Snapshot != "" && rt.host.carried == nil {
		// Restored on the session's first sandbox use, wherever it claims a host (hostCtx).
		rt.host.snap = &api.SnapshotRef{Manifest: f.Snapshot}
		rt.parked = true
	}
}

// forkCarry is what a continuation keeps of the fork: its snapshot when the workspace was
// never restored (the fork has not used its sandbox yet, so no host carries it); nil
// otherwise, the thread being in the carry.
func (s *session) forkCarry(rt *runtime) *api.SessionFork {
	f := s.in.Fork
	if f == nil || f.Snapshot == "" || !rt.parked || rt.host.cur != nil || rt.host.carried != nil {
		return nil
	}
	return &api.SessionFork{Session: f.Session, Turn: f.Turn, Snapshot: f.Snapshot}
}

func (s *session) shouldContinue() bool {
	return s.continueNow || (s.in.ContinueAfterTurns > 0 && s.turnsHere >= s.in.ContinueAfterTurns)
}

func (s *session) historyTooLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > sessionHistoryBound
}

// prompt serves one prompt when its turn comes: prompts are served strictly in the order
// their updates were accepted.
func (s *session) prompt(ctx workflow.Context, rt *runtime, req api.PromptRequest) (api.PromptReply, error) {
	ticket := s.next
	s.next++
	defer func() { s.serving++ }()
	if err := workflow.Await(ctx, func() bool { return s.serving == ticket && s.spec.Name != "" }); err != nil {
		return api.PromptReply{}, err
	}
	n := s.carry.TurnCount() + 1
	turn := api.SessionTurn{N: n, Prompt: req.Text, Started: workflow.Now(ctx).UTC()}
	input := map[string]any{"text": req.Text, "turn": n}
	if req.MaxTurns > 0 {
		input["max_turns"] = req.MaxTurns
	}
	dir, _ := api.CleanDir(req.Dir) // the validator refused a bad one
	if dir != "" {
		input["dir"] = dir
	}
	rt.emit(ctx, api.StreamUserInput, input)
	turn.FirstSeq = rt.lastSeq()
	// The turn runs under its own context, which nexo.interrupt cancels; what follows the
	// turn (its record, turn_end) runs under the handler's.
	tctx, cancel := workflow.WithCancel(ctx)
	live := &liveTurn{n: n, cancel: cancel}
	s.live = live
	rt.toolDir = dir
	res, err := s.runTurn(tctx, rt, n, req)
	reply, usage := res.Content, res.Usage
	rt.toolDir = ""
	s.live = nil
	cancel()
	turn.Ended = workflow.Now(ctx).UTC()
	turn.Usage = usage
	endData := map[string]any{"turn": n}
	if live.interrupted && err != nil {
		// Whatever the cancellation left the turn waiting on (an approval) is over.
		rt.endInterrupted(ctx)
		turn.Interrupted, endData["interrupted"] = true, true
		err = nil
	}
	if err != nil {
		turn.Error = err.Error()
		endData["error"] = err.Error()
	} else {
		// A long reply stays a reference (a preview in Reply): readers resolve it.
		turn.Reply, turn.ReplyRef, turn.ReplyBytes = reply, res.ContentRef, res.ContentBytes
	}
	// turn_end closes the turn for every viewer, success or failure.
	rt.emit(ctx, api.StreamTurnEnd, endData)
	turn.LastSeq = rt.lastSeq()
	s.carry.Turns = append(s.carry.Turns, turn)
	if s.conv.byRef {
		// The materialised history keeps the newest turns; every turn is in the archived
		// stream (user_input ... turn_end).
		s.carry.TurnTotal = n
		s.carry.Turns = trimTurns(s.carry.Turns)
	}
	s.turnsHere++
	if !s.shouldContinue() && s.historyTooLong(ctx) {
		s.continueNow = true // once idle; this run only, not carried into the next one's input
	}
	if err != nil {
		// The turn's error keeps its type for the client (the update's failure), under the
		// same text as the turn's record.
		return api.PromptReply{Turn: n}, failure(err.Error(), err)
	}
	return api.PromptReply{Turn: n, Reply: reply, ReplyRef: res.ContentRef, ReplyBytes: res.ContentBytes, Interrupted: turn.Interrupted}, nil
}

// runTurn runs the agent loop on one prompt; a failed (or interrupted) turn returns only
// its usage.
func (s *session) runTurn(ctx workflow.Context, rt *runtime, n int, req api.PromptRequest) (api.AgentResult, error) {
	if s.tools == nil {
		// Before the first turn: requires probed, skills loaded and copied (once per run;
		// a failure fails this prompt and the next one tries again).
		skills, err := rt.prepareAgent(ctx, s.spec)
		if err != nil {
			return api.AgentResult{}, err
		}
		ts, err := rt.toolset(ctx, s.spec)
		if err != nil {
			return api.AgentResult{}, err
		}
		s.tools, s.skills = &ts, skills
	}
	conv := s.conv.clone()
	conv.add(api.ChatMessage{Role: api.RoleUser, Content: req.Text})
	style := loopStyle{session: true, idPrefix: fmt.Sprintf("%d.", n), streamTo: rt.rec.ID, steer: s.takeSteers(ctx, rt)}
	spec := s.spec
	if req.MaxTurns > 0 {
		spec.MaxTurns = req.MaxTurns // this turn's bound; the agent's stays the default
	}
	res, err := rt.tracedAgentLoop(ctx, spec, *s.tools, s.skills, conv, style)
	if err != nil {
		// A failed (or interrupted) turn leaves the thread as it was: the next prompt
		// starts clean.
		return api.AgentResult{Usage: res.Usage}, err
	}
	s.conv = conv
	return res, nil
}

// interrupt ends the turn in flight: its context is cancelled, so the model or tool call
// it waits on is cancelled (a command: behind ChangeSessionInterrupt), and the turn ends
// with an interrupted turn_end. It returns once the turn has ended.
func (s *session) interrupt(ctx workflow.Context) (api.InterruptReply, error) {
	live := s.live
	if live == nil {
		return api.InterruptReply{}, s.noTurnError("interrupt")
	}
	if workflow.GetVersion(ctx, ChangeSessionInterrupt, workflow.DefaultVersion, 1) < 1 {
		// Unreachable on this code (no run recorded before the change had the update).
		return api.InterruptReply{}, errors.New("this session run cannot interrupt a turn")
	}
	live.interrupted = true
	live.cancel()
	if err := workflow.Await(ctx, func() bool { return s.live != live }); err != nil {
		return api.InterruptReply{}, err
	}
	if t := s.carry.Turns; len(t) > 0 && t[len(t)-1].N == live.n && !t[len(t)-1].Interrupted {
		// The turn's last call had returned in the same workflow task: it ended as it was.
		return api.InterruptReply{}, fmt.Errorf("turn %d ended before the interrupt reached it", live.n)
	}
	return api.InterruptReply{Turn: live.n}, nil
}

// steer hands text to the turn in flight, for its next model call, and returns once a
// model call took it. A turn that ends first (its answer was the last call) refuses it.
func (s *session) steer(ctx workflow.Context, req api.SteerRequest) (api.SteerReply, error) {
	live := s.live
	if live == nil {
		return api.SteerReply{}, s.noTurnError("steer")
	}
	pos := live.taken + len(live.steers)
	live.steers = append(live.steers, req.Text)
	if err := workflow.Await(ctx, func() bool { return live.taken > pos || s.live != live }); err != nil {
		return api.SteerReply{}, err
	}
	if live.taken <= pos {
		return api.SteerReply{}, fmt.Errorf("turn %d ended before another model call took the message; send it as a prompt", live.n)
	}
	return api.SteerReply{Turn: live.n}, nil
}

// takeSteers is the loop's hook before each model call: the messages steered since the
// last one, recorded as steer events.
func (s *session) takeSteers(ctx workflow.Context, rt *runtime) func() []string {
	return func() []string {
		live := s.live
		if live == nil || len(live.steers) == 0 || live.interrupted {
			return nil
		}
		texts := live.steers
		live.steers = nil
		live.taken += len(texts)
		for _, t := range texts {
			rt.emit(ctx, api.StreamSteer, map[string]any{"text": t, "turn": live.n})
		}
		return texts
	}
}

// endInterrupted clears what an interrupted turn may have left waiting: a call's approval
// (or a budget's decision), which is remembered as decided by the interrupt, and the
// suspended status.
func (rt *runtime) endInterrupted(ctx workflow.Context) {
	rt.pending = nil
	if a, ok := rt.rec.Approval(); ok {
		rt.rememberDecided(a.CallID, "canceled by an interrupt")
	}
	delete(rt.rec.State, api.StateApproval)
	delete(rt.rec.State, api.StateSuspend)
	if rt.rec.Status == api.StatusSuspended {
		rt.setStatus(ctx, api.StatusRunning)
	}
}

// inToolDir returns call with its file path (read_file, write_file) or glob pattern joined
// with the turn's tool directory, so permissions, the record and the sandbox all see the
// workspace path the call touches. A path that is absolute, or arguments that are no JSON
// object, are left as they are (the sandbox and the tool decide those).
func (rt *runtime) inToolDir(call api.ToolCall) api.ToolCall {
	key := map[string]string{agents.ToolReadFile: "path", agents.ToolWriteFile: "path", agents.ToolGlob: "pattern"}[call.Name]
	if rt.toolDir == "" || key == "" {
		return call
	}
	var args map[string]any
	if json.Unmarshal([]byte(orEmptyObject(call.Arguments)), &args) != nil {
		return call
	}
	p, ok := args[key].(string)
	if !ok || p == "" || path.IsAbs(p) {
		return call
	}
	args[key] = path.Join(rt.toolDir, p)
	call.Arguments = string(mustJSON(args))
	return call
}

func (rt *runtime) lastSeq() int64 { return rt.seqBase + int64(len(rt.rec.Events)) }

func (s *session) snapshot(rt *runtime) api.SessionCarry {
	c := s.carry
	c.StreamOffset = rt.lastSeq()
	if s.conv.byRef {
		// References only: the stored thread's head, what follows it, the newest messages
		// for viewers, and the run's remembered decisions and file stamps.
		c.Thread = s.conv.pending
		c.ThreadRef, c.Recent = nil, s.conv.view()
		if s.conv.ref.Head != "" {
			ref := s.conv.ref
			c.ThreadRef = &ref
		}
		c.Approvals, c.Stamps = rt.carryApprovals(), rt.stamps
	} else {
		c.Thread = s.conv.thread
	}
	c.Decided = rt.carryDecided()
	rt.carryBudget(&c)
	c.Segments = nil
	for _, a := range rt.rec.Artifacts {
		if strings.HasPrefix(a.Name, "stream-") {
			c.Segments = append(c.Segments, a)
		}
	}
	return c
}

// archive stores this run's activity stream as a segment artifact, so watching from an old
// offset still works after continue-as-new, and returns the carry for the next run.
//
// The stream is written in segments of at most s.segmentBytes: each segment is an
// activity's input, and one payload for a whole run's stream could pass Temporal's 2 MB
// limit exactly when the history is long enough to continue as new.
func (s *session) archive(ctx workflow.Context, rt *runtime) (api.SessionCarry, error) {
	events := rt.rec.Events // writing a segment records an event; those stay in the record
	var b strings.Builder
	first := 0 // index in events of the segment's first event
	flush := func(last int) error {
		name := fmt.Sprintf("stream-%09d-%09d.jsonl", events[first].Seq, events[last].Seq)
		if _, err := rt.artifact(ctx, name, ArtifactSource{Content: []byte(b.String())}, false); err != nil {
			return fmt.Errorf("archive session stream: %w", err)
		}
		b.Reset()
		first = last + 1
		return nil
	}
	for i, e := range events {
		line := mustJSON(e)
		if b.Len() > 0 && b.Len()+len(line)+1 > s.segmentBytes {
			if err := flush(i - 1); err != nil {
				return s.snapshot(rt), err
			}
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if b.Len() > 0 {
		if err := flush(len(events) - 1); err != nil {
			return s.snapshot(rt), err
		}
	}
	return s.snapshot(rt), nil
}

func (s *session) view(rt *runtime) api.SessionView {
	return api.SessionView{ID: rt.rec.ID, Agent: s.in.Agent, Instance: s.in.Instance, Status: rt.rec.Status,
		Turns: s.carry.Turns, TurnCount: s.carry.TurnCount(), Messages: s.conv.view(), MessageCount: s.conv.count(),
		StreamOffset: rt.lastSeq(), Runs: s.carry.Runs, Usage: rt.rec.Usage.Clone()}
}

// sessionTurnsKept bounds the turns a session's materialised history keeps (and carries).
const sessionTurnsKept = 100

func trimTurns(turns []api.SessionTurn) []api.SessionTurn {
	if n := len(turns) - sessionTurnsKept; n > 0 {
		return append([]api.SessionTurn(nil), turns[n:]...)
	}
	return turns
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("nexo: encode %T: %v", v, err))
	}
	return b
}
