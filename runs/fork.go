package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
)

// ForkRequest forks an agent run at one of its tool calls (`starter fork`).
type ForkRequest struct {
	Run string
	// At is the tool call ("3.1"): the new run starts from the thread before the model
	// call that asked for it, in the workspace the call found.
	At string
	// ID is the new run's id ("" for a new UUIDv7).
	ID string
	// Prompt, when set, is appended as a user message before the model is asked again.
	Prompt string
	// Args, when set, re-issues the call with these arguments (a JSON object) instead of
	// asking the model again.
	Args json.RawMessage
}

// Fork starts a new run of the source's agent from its thread and workspace at req.At;
// the source is untouched. It returns the new run's id. Only references travel: the
// thread's head, the snapshot's manifest.
func (c *Client) Fork(ctx context.Context, st WorkspaceStore, req ForkRequest) (string, error) {
	if req.Prompt != "" && len(req.Args) > 0 {
		return "", &BadRequestError{Msg: "fork takes --prompt or --args, not both: --args re-runs the call as edited, --prompt asks the model again"}
	}
	if len(req.Args) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(req.Args, &obj); err != nil || obj == nil {
			return "", &BadRequestError{Msg: fmt.Sprintf("--args is not a JSON object: %.80s", req.Args)}
		}
	}
	rec, err := c.Get(ctx, req.Run)
	if err != nil {
		return "", err
	}
	if rec.Workflow != api.WorkflowAgentRun {
		return "", &BadRequestError{Msg: fmt.Sprintf("run %s is a %s run: only agent runs (AgentRun) can be forked at a call; a session forks with `starter session fork`", rec.ID, rec.Workflow)}
	}
	var in api.AgentRunInput
	if err := json.Unmarshal(rec.Payload, &in); err != nil || in.Agent == "" {
		return "", fmt.Errorf("fork run %s: its input names no agent: %.120s", rec.ID, rec.Payload)
	}
	turn, _, ok := strings.Cut(req.At, ".")
	if !ok || turn == "" {
		return "", &UnknownCallError{RunID: rec.ID, CallID: req.At}
	}
	snap, err := SnapshotAt(ctx, st, rec, req.At)
	if err != nil && !isNoSnapshots(err) {
		return "", err
	}
	fork := &api.ForkInput{Run: rec.ID, Call: req.At, Snapshot: snap, Prompt: req.Prompt}
	chat, reply, err := c.modelCall(ctx, rec.ID, turn)
	if err != nil {
		return "", err
	}
	fork.Thread, fork.Messages = chat.Thread, chat.Messages
	if chat.Thread == nil {
		fork.Messages = chat.Messages // a thread kept by value: the whole thread
	}
	if len(req.Args) > 0 {
		msg := api.ChatMessage{Role: api.RoleAssistant, Content: reply.Content}
		found := false
		for _, tc := range reply.ToolCalls {
			if tc.ID == req.At {
				tc.Arguments = string(req.Args)
				msg.ToolCalls = append(msg.ToolCalls, tc)
				found = true
				break
			}
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
		if !found {
			return "", &UnknownCallError{RunID: rec.ID, CallID: req.At}
		}
		fork.Reply = &msg
	}
	in.Fork = fork
	payload, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("fork run %s: encode the input: %w", rec.ID, err)
	}
	// An AgentRun of the run's own agent, which ran on this task queue: not asked of the
	// registry again (as a re-run is not), so a fork needs no live worker to be accepted.
	return c.Start(ctx, StartRequest{Workflow: api.WorkflowAgentRun, Payload: payload, ID: req.ID, Unchecked: true})
}

func isNoSnapshots(err error) bool { return errors.Is(err, ErrNoSnapshots) }

// modelCall finds, in run id's history, the model call tagged turn: its input (the thread
// before the reply) and its reply with the workflow's call ids.
func (c *Client) modelCall(ctx context.Context, id, turn string) (api.CompleteChatRequest, api.ChatMessage, error) {
	req, reply, found, err := c.scanModelCall(ctx, id, "", turn)
	switch {
	case err != nil:
		return req, api.ChatMessage{}, err
	case !found:
		return req, api.ChatMessage{}, fmt.Errorf("run %s has no model call %s in its history (a run recorded before model calls were tagged cannot be forked)", id, turn)
	case reply == nil:
		return req, api.ChatMessage{}, fmt.Errorf("model call %s of run %s has not completed", turn, id)
	}
	return req, *reply, nil
}

// scanModelCall reads the history of run runID of workflow id ("": its latest run) for
// the model call tagged tag: found says whether it was scheduled there, reply is nil
// until it completed.
func (c *Client) scanModelCall(ctx context.Context, id, runID, tag string) (req api.CompleteChatRequest, reply *api.ChatMessage, found bool, err error) {
	it := c.tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var scheduled int64
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return req, nil, false, fmt.Errorf("read history of run %s: %w", id, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() != api.ActivityCompleteChat || scheduled != 0 {
				continue
			}
			p, err := c.firstPayload(ctx, a.GetInput())
			if err != nil {
				return req, nil, false, fmt.Errorf("read a model call of run %s: %w", id, err)
			}
			var r api.CompleteChatRequest
			if p == nil || json.Unmarshal(p, &r) != nil || r.CallID != tag {
				continue
			}
			req, scheduled = r, ev.GetEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if scheduled == 0 || a.GetScheduledEventId() != scheduled {
				continue
			}
			p, err := c.firstPayload(ctx, a.GetResult())
			if err != nil {
				return req, nil, true, fmt.Errorf("read model call %s of run %s: %w", tag, id, err)
			}
			var out api.CompleteChatResult
			if p == nil || json.Unmarshal(p, &out) != nil {
				return req, nil, true, fmt.Errorf("read model call %s of run %s: its result is not readable", tag, id)
			}
			msg := out.Message
			for i := range msg.ToolCalls {
				msg.ToolCalls[i].ID = fmt.Sprintf("%s.%d", tag, i+1)
			}
			return req, &msg, true, nil
		}
	}
	return req, nil, scheduled != 0, nil
}
