package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// Suspend pauses the run until a fitting nexo.resume signal arrives and returns that
// signal's input. While it waits, the run's status is "suspended" and state["__suspend__"]
// holds the reason and resume key; no worker is held. When resumeKey is set, a signal
// must carry the same key. A signal that does not fit is recorded as a "signal_ignored"
// event and the run keeps waiting. A signal with a future "at" schedules the resume on a
// durable timer.
//
// This is a true continuation: code before Suspend does not run again.
func Suspend(ctx workflow.Context, reason, resumeKey string) (map[string]any, error) {
	return suspend(ctx, reason, resumeKey, nil)
}

// ResumeInput is what a resume input type may implement to refuse a value that decodes
// but does not fit (a required field left out).
type ResumeInput interface{ Validate() error }

// SuspendFor is Suspend for a workflow that knows the shape of its resume input: a signal
// whose input does not decode strictly into T (an unknown field such as "aproved", a
// wrong type such as "approved": "true") or whose T.Validate fails is recorded as
// "signal_ignored" with the reason and the run keeps waiting, so a typo never reads as a
// decision.
func SuspendFor[T any](ctx workflow.Context, reason, resumeKey string) (T, error) {
	var zero T
	input, err := suspend(ctx, reason, resumeKey, func(in map[string]any) error {
		_, err := decodeResumeInput[T](in)
		return err
	})
	if err != nil {
		return zero, err
	}
	return decodeResumeInput[T](input)
}

// decodeResumeInput decodes in strictly into T and validates it.
func decodeResumeInput[T any](in map[string]any) (T, error) {
	var v T
	raw, err := json.Marshal(in)
	if err != nil {
		return v, fmt.Errorf("resume input: %v", err)
	}
	if in == nil {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("resume input does not fit: %v", err)
	}
	if val, ok := any(v).(ResumeInput); ok {
		if err := val.Validate(); err != nil {
			return v, fmt.Errorf("resume input does not fit: %v", err)
		}
	}
	return v, nil
}

func suspend(ctx workflow.Context, reason, resumeKey string, check func(map[string]any) error) (map[string]any, error) {
	rt, err := runtimeOf(ctx, "suspend ("+reason+")")
	if err != nil {
		return nil, err
	}
	rt.suspendGen++
	rt.suspended = true
	rt.suspendKey = resumeKey
	rt.suspendCheck = check
	rt.resumeReady = false
	rt.resumeInput = nil
	rt.setState(ctx, api.StateSuspend, api.SuspendInfo{Reason: reason, ResumeKey: resumeKey, At: workflow.Now(ctx).UTC()})
	rt.emit(ctx, "suspended", map[string]string{"reason": reason, "resume_key": resumeKey})
	rt.setStatus(ctx, api.StatusSuspended)

	err = rt.waitForHuman(ctx, func() bool { return rt.resumeReady })
	rt.suspended = false
	rt.suspendCheck = nil
	if err != nil {
		return nil, err
	}
	input := rt.resumeInput
	if input == nil {
		input = map[string]any{}
	}
	delete(rt.rec.State, api.StateSuspend)
	rt.emit(ctx, "resumed", map[string]any{"input": input})
	rt.setStatus(ctx, api.StatusRunning)
	return input, nil
}

// startSignalDispatcher drains the run's signal channels for its whole life, so every
// signal is either delivered to a waiter or recorded as ignored: none is silently lost
// and none can crash the run (a payload is decoded here, not by the SDK, which would drop
// a malformed one without a trace).
func startSignalDispatcher(ctx workflow.Context, rt *runtime) {
	resumeCh := workflow.GetSignalChannel(ctx, api.SignalResume)
	approvalCh := workflow.GetSignalChannel(ctx, api.SignalApproval)
	streamCh := workflow.GetSignalChannel(ctx, api.SignalStream)
	registerDecide(ctx, rt)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(resumeCh, func(c workflow.ReceiveChannel, _ bool) {
				var raw json.RawMessage
				c.Receive(ctx, &raw)
				rt.onResume(ctx, raw)
			})
			sel.AddReceive(approvalCh, func(c workflow.ReceiveChannel, _ bool) {
				var raw json.RawMessage
				c.Receive(ctx, &raw)
				rt.onApproval(ctx, raw)
			})
			sel.AddReceive(streamCh, func(c workflow.ReceiveChannel, _ bool) {
				var raw json.RawMessage
				c.Receive(ctx, &raw)
				rt.onStream(ctx, raw)
			})
			sel.Select(ctx)
		}
	})
}

func (rt *runtime) ignore(ctx workflow.Context, signal, why string) {
	rt.emit(ctx, "signal_ignored", map[string]string{"signal": signal, "reason": why})
	workflow.GetLogger(ctx).Warn("signal ignored", "signal", signal, "reason", why)
}

func (rt *runtime) onResume(ctx workflow.Context, raw json.RawMessage) {
	var sig api.ResumeSignal
	if err := decodeSignal(raw, &sig); err != nil {
		rt.ignore(ctx, api.SignalResume, err.Error())
		return
	}
	if rt.pending != nil && rt.pending.decision == nil {
		rt.ignore(ctx, api.SignalResume, fmt.Sprintf("run waits for approval of tool call %s; send %s", rt.pending.callID, api.SignalApproval))
		return
	}
	if !rt.suspended {
		rt.ignore(ctx, api.SignalResume, fmt.Sprintf("run is not suspended (%s)", rt.rec.Status))
		return
	}
	if rt.suspendKey != "" && sig.ResumeKey != rt.suspendKey {
		rt.ignore(ctx, api.SignalResume, fmt.Sprintf("resume key %q does not match the run's key", sig.ResumeKey))
		return
	}
	if rt.suspendCheck != nil {
		if err := rt.suspendCheck(sig.Input); err != nil {
			rt.ignore(ctx, api.SignalResume, err.Error())
			return
		}
	}
	now := workflow.Now(ctx)
	if sig.At != nil && sig.At.After(now) {
		rt.scheduleResume(ctx, sig)
		return
	}
	rt.resumeInput = sig.Input
	rt.resumeReady = true
}

// scheduleResume resumes the current suspension at sig.At with a durable timer, unless it
// has been resumed (or rescheduled) by then.
func (rt *runtime) scheduleResume(ctx workflow.Context, sig api.ResumeSignal) {
	gen := rt.suspendGen
	at := sig.At.UTC()
	var info api.SuspendInfo
	_ = json.Unmarshal(rt.rec.State[api.StateSuspend], &info)
	info.ResumeAt = &at
	rt.setState(ctx, api.StateSuspend, info)
	rt.emit(ctx, "resume_scheduled", map[string]any{"at": at})
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := workflow.Sleep(ctx, at.Sub(workflow.Now(ctx))); err != nil {
			return
		}
		var cur api.SuspendInfo
		_ = json.Unmarshal(rt.rec.State[api.StateSuspend], &cur)
		// Only the newest schedule of the same suspension fires.
		if rt.suspendGen != gen || !rt.suspended || rt.resumeReady || cur.ResumeAt == nil || !cur.ResumeAt.Equal(at) {
			return
		}
		rt.resumeInput = sig.Input
		rt.resumeReady = true
	})
}

// approvalWaiter is the tool call currently waiting for a human decision.
type approvalWaiter struct {
	callID  string
	tool    string
	argsSHA string
	// decision is set once, by nexo.approval (as approve or deny) or by nexo.decide.
	decision *api.DecideRequest
	// budget is set when the waiter is a budget pause, not a tool call (budget.go).
	budget *api.BudgetPause
}

func (rt *runtime) onApproval(ctx workflow.Context, raw json.RawMessage) {
	var sig api.ApprovalSignal
	if err := decodeSignal(raw, &sig); err != nil {
		rt.ignore(ctx, api.SignalApproval, err.Error())
		return
	}
	w := rt.pending
	if w == nil || w.decision != nil {
		rt.ignore(ctx, api.SignalApproval, fmt.Sprintf("no tool call is waiting for approval (call %q)", sig.CallID))
		return
	}
	if sig.CallID != "" && sig.CallID != w.callID {
		rt.ignore(ctx, api.SignalApproval, fmt.Sprintf("call %q is not pending (pending: %q)", sig.CallID, w.callID))
		return
	}
	if w.budget != nil {
		rt.ignore(ctx, api.SignalApproval, fmt.Sprintf("%s is a budget pause: decide it with %s (starter approve --budget, or deny)", w.callID, api.UpdateDecide))
		return
	}
	// The signal keeps its behaviour: approve or deny, never edit (its args are ignored,
	// as they always were) nor answer.
	d := api.DecideRequest{CallID: w.callID, Action: api.DecideDeny, Reason: sig.Reason, Always: sig.Always, By: sig.By}
	if sig.Approved {
		d.Action = api.DecideApprove
	}
	w.decision = &d
}

// registerDecide registers the nexo.decide Update. Why an Update and not only the
// signal: a signal that does not fit can only be recorded as ignored after the fact,
// while the validator refuses a wrong decision synchronously, telling the decider why,
// and a refused Update leaves no trace in history. Registering a handler is no command,
// so runs recorded before it replay unchanged.
func registerDecide(ctx workflow.Context, rt *runtime) {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.UpdateDecide,
		func(ctx workflow.Context, req api.DecideRequest) (api.DecideResult, error) {
			// Validated when it arrived; checked again, as the handler is what lands.
			if err := rt.checkDecision(req); err != nil {
				return api.DecideResult{}, err
			}
			w := rt.pending
			w.decision = &req
			res := api.DecideResult{CallID: w.callID, Tool: w.tool, Action: req.Action, Reason: req.Reason,
				Always: req.Always, By: req.By, At: workflow.Now(ctx).UTC()}
			if len(req.Args) > 0 {
				res.EditedArgs = compactJSON(req.Args)
			}
			res.Budget = req.Budget
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req api.DecideRequest) error {
			return rt.checkDecision(req)
		}}); err != nil {
		panic(fmt.Sprintf("register update %s: %v", api.UpdateDecide, err)) // only on a duplicate name
	}
}

// checkDecision says why req cannot decide the pending call, or nil. It reads state
// only, so it is fit for a validator.
func (rt *runtime) checkDecision(req api.DecideRequest) error {
	// The request's own bounds first (a validator's refusal writes no history; a
	// validator's change is replay-safe, the SDK does not run it for accepted updates).
	if p := req.Problem(); p != "" {
		return errors.New(p)
	}
	if err, handled := rt.checkBudgetDecision(req); handled {
		return err
	}
	switch req.Action {
	case api.DecideApprove, api.DecideDeny, api.DecideAnswer:
	default:
		return fmt.Errorf("action %q is not one of %s, %s, %s", req.Action, api.DecideApprove, api.DecideDeny, api.DecideAnswer)
	}
	if len(req.Args) > 0 {
		if req.Action != api.DecideApprove {
			return fmt.Errorf("args (edited arguments) go with action %s only, not %s", api.DecideApprove, req.Action)
		}
		var m map[string]any
		if err := json.Unmarshal(req.Args, &m); err != nil || m == nil {
			return fmt.Errorf("args must be a JSON object (the call's edited arguments), got %.80s", req.Args)
		}
		if req.Always {
			return fmt.Errorf("always does not go with edited args: it would approve later calls of the tool that nobody edited")
		}
	}
	if req.Action == api.DecideAnswer {
		if strings.TrimSpace(req.Result) == "" {
			return fmt.Errorf("answer needs a result: the text the model gets instead of the tool's output")
		}
		if req.Always {
			return fmt.Errorf("always does not go with answer: an answer is for one call")
		}
	} else if req.Result != "" {
		return fmt.Errorf("result goes with action %s only, not %s", api.DecideAnswer, req.Action)
	}
	if strings.TrimSpace(req.CallID) == "" {
		return fmt.Errorf("call_id is empty: name the pending tool call (the run's state __approval__.call_id)")
	}
	w := rt.pending
	if w != nil && w.decision == nil {
		if req.CallID != w.callID {
			if how, ok := rt.decided[req.CallID]; ok {
				return fmt.Errorf("tool call %s was already decided (%s); the pending call is %s (%s)", req.CallID, how, w.callID, w.tool)
			}
			return fmt.Errorf("unknown tool call %q: the pending call is %s (%s)", req.CallID, w.callID, w.tool)
		}
		if req.ArgsSHA256 == "" {
			return fmt.Errorf("args_sha256 is empty: a decision carries the sha256 of the arguments it decides (state __approval__.args_sha256)")
		}
		if !strings.EqualFold(req.ArgsSHA256, w.argsSHA) {
			return fmt.Errorf("the arguments of tool call %s changed since the request: args_sha256 %s is not the pending call's; read the run again", req.CallID, req.ArgsSHA256)
		}
		return nil
	}
	if how, ok := rt.decided[req.CallID]; ok {
		return fmt.Errorf("tool call %s was already decided (%s)", req.CallID, how)
	}
	if w != nil && w.callID == req.CallID {
		return fmt.Errorf("tool call %s was already decided", req.CallID)
	}
	return fmt.Errorf("run %s is not waiting for a decision (%s): no tool call is pending, and %q is none of its calls", rt.rec.ID, rt.rec.Status, req.CallID)
}

// compactJSON is raw without insignificant space: how a record shows it (encoding/json
// compacts a RawMessage), so a sha256 over it is the one a reader of the record computes.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// decodeSignal decodes a signal payload strictly: unknown fields are a mistake worth
// reporting (a typo such as "aproved" must not read as a denial).
func decodeSignal(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("malformed signal: empty payload")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed signal: %v", err)
	}
	return nil
}

// onStream appends streamed model output to the activity stream while the model call is
// in progress. A chunk for a call that already returned (a late retry) is dropped: the
// call's text is already recorded.
func (rt *runtime) onStream(ctx workflow.Context, raw json.RawMessage) {
	var c api.StreamChunk
	if err := decodeSignal(raw, &c); err != nil {
		rt.ignore(ctx, api.SignalStream, err.Error())
		return
	}
	if rt.streamCall == "" || c.Call != rt.streamCall || c.Text == "" {
		return
	}
	kind := api.StreamText
	if c.Kind == api.StreamThinking {
		kind = api.StreamThinking
	}
	if kind == api.StreamText {
		if rt.streamed == nil {
			rt.streamed = map[string]string{}
		}
		rt.streamed[c.Call] += c.Text
	}
	rt.emit(ctx, kind, map[string]string{"content": c.Text, "call": c.Call})
}

// defaultIdleTimeout is how long a waiting run keeps its container (api.SandboxSpec).
const defaultIdleTimeout = 10 * time.Minute

// waitForHuman blocks until cond holds. A run with a docker sandbox keeps its container
// only for the sandbox's idle timeout: then its whole workspace is archived to the
// artifact store and the container removed, and when the wait ends a fresh container
// gets the workspace back, so the agent finds exactly the files it left.
func (rt *runtime) waitForHuman(ctx workflow.Context, cond func() bool) error {
	rt.parkAtSuspend(ctx) // runs on host queues: snapshot the workspace (hostq.go)
	if rt.sandbox.Type != api.SandboxDocker || !rt.sandboxUsed {
		return workflow.Await(ctx, cond)
	}
	idle := time.Duration(rt.sandbox.IdleTimeout)
	if idle <= 0 {
		idle = defaultIdleTimeout
	}
	done, err := workflow.AwaitWithTimeout(ctx, idle, cond)
	if err != nil || done {
		return err
	}
	req := api.ReleaseSandboxRequest{RunID: rt.rec.ID, Sandbox: rt.sandbox}
	var size int64
	if err := rt.onSandbox(ctx, nil, api.ActivityParkSandbox, req, &size); err != nil {
		// The container stays; the run still waits. Nothing is lost, only held.
		rt.emit(ctx, "sandbox_park_failed", map[string]string{"error": errorMessage(err)})
		return workflow.Await(ctx, cond)
	}
	rt.emit(ctx, "sandbox_parked", map[string]any{"archive_bytes": size, "idle": idle.String()})
	rt.noteParked(ctx)
	// No container, so no worker to hold: the next sandbox activity opens a new worker
	// session, on any worker, and restores the workspace there first (hostroute.go).
	rt.leaveHost()
	rt.parked = true
	return workflow.Await(ctx, cond)
}
