package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// promptClient is a Temporal client holding no closed session, whose update-with-start
// fails with the scripted errors in turn, then answers reply.
type promptClient struct {
	client.Client
	fails   []error
	reply   api.PromptReply
	prompts int
}

func (c *promptClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

// QueryWorkflowWithOptions: the task queue has no worker registry, so nothing is known of
// the agents' pools (Prompt then sends the prompt, as without pools).
func (c *promptClient) QueryWorkflowWithOptions(context.Context, *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

func (c *promptClient) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return nil
}

func (c *promptClient) UpdateWithStartWorkflow(context.Context, client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.prompts++
	h := &promptHandle{reply: c.reply}
	if len(c.fails) > 0 {
		h.err, c.fails = c.fails[0], c.fails[1:]
	}
	return h, nil
}

type promptHandle struct {
	client.WorkflowUpdateHandle
	err   error
	reply api.PromptReply
}

func (h *promptHandle) Get(_ context.Context, v any) error {
	if h.err != nil {
		return h.err
	}
	b, _ := json.Marshal(h.reply)
	return json.Unmarshal(b, v)
}

// TestPromptRetriesAHandoverByType: a prompt refused because the session hands over to its
// continue-as-new run is sent again, recognised by the refusal's type whatever its words;
// a refusal of another type that happens to use the same words is the caller's error.
func TestPromptRetriesAHandoverByType(t *testing.T) {
	handover := temporal.NewApplicationErrorWithOptions("the session moves on (reworded)", api.ErrTypeSessionHandover,
		temporal.ApplicationErrorOptions{Details: []any{api.SessionHandover{Session: "session:a:i", RunID: "r1"}}})
	serverClosed := temporal.NewNonRetryableApplicationError(
		"Workflow Update failed because the Workflow completed before the Update completed.", acceptedUpdateCompletedWorkflow, nil)
	lookalike := temporal.NewApplicationError("session is continuing as new; retry the prompt", "SomethingElse")

	tests := []struct {
		name        string
		fails       []error
		wantPrompts int
		wantErrType string // "" for success
	}{
		{"own refusal, then served", []error{handover, handover}, 3, ""},
		{"server closed the run under the update", []error{serverClosed}, 2, ""},
		{"run closed before the update-with-start reached it", []error{serviceerror.NewNotFound("workflow execution already completed")}, 2, ""},
		{"same words, other type", []error{lookalike}, 1, "SomethingElse"},
		{"a handover longer than five sends is waited out", repeat(handover, 12), 13, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &promptClient{fails: tt.fails, reply: api.PromptReply{Turn: 1, Reply: "hello"}}
			c := New(fc, "default", "nexo")
			c.handoverPause = time.Millisecond
			var note string
			reply, err := c.Prompt(context.Background(), "a", "i", "hi", PromptOptions{OnRetry: func(n string) { note = n }})
			if fc.prompts != tt.wantPrompts {
				t.Errorf("prompts sent = %d, want %d", fc.prompts, tt.wantPrompts)
			}
			if tt.wantErrType == "" {
				if err != nil || reply.Reply != "hello" {
					t.Fatalf("Prompt = %+v, %v; want the reply", reply, err)
				}
				if want := fmt.Sprintf("sent %d times", tt.wantPrompts); tt.wantPrompts > 1 && !strings.Contains(note, want) {
					t.Errorf("retry note = %q, want one saying %q", note, want)
				} else if tt.wantPrompts == 1 && note != "" {
					t.Errorf("retry note = %q on a prompt answered at once", note)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != tt.wantErrType {
				t.Fatalf("Prompt error = %v; want an ApplicationError of type %s", err, tt.wantErrType)
			}
			if want := "session session:a:i: " + app.Message(); err.Error() != want {
				t.Errorf("error text = %q, want %q", err.Error(), want)
			}
		})
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// TestPromptHandoverBoundedByDeadline: a handover that outlasts the caller's deadline ends
// the prompt at that deadline with an error that says the session is still handing over
// (and is still of the handover's type), not after a fixed number of sends.
func TestPromptHandoverBoundedByDeadline(t *testing.T) {
	handover := temporal.NewApplicationErrorWithOptions("session is continuing as new; retry the prompt", api.ErrTypeSessionHandover, temporal.ApplicationErrorOptions{})
	fc := &promptClient{fails: repeat(handover, 1_000_000)}
	c := New(fc, "default", "nexo")
	c.handoverPause = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Prompt(ctx, "a", "i", "hi", PromptOptions{})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != api.ErrTypeSessionHandover || !strings.Contains(err.Error(), "still handing over") {
		t.Fatalf("Prompt past the deadline = %v; want the handover named as still going on", err)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
		t.Errorf("Prompt gave up after %s, want about the 300ms deadline", el)
	}
	if fc.prompts <= 5 {
		t.Errorf("prompts sent = %d, want more than the old 5 within the deadline", fc.prompts)
	}
}
