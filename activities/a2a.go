package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/api"
)

// A2A calls remote Agent2Agent agents (an agent's `a2a:` remotes) with a2a-go's own
// client, from the worker that runs the call: the remote is reached over the worker's
// network, never the sandbox's, and its token is read here, from the environment
// variable its token_env names, so it never enters history, events or logs.
type A2A struct {
	out       outputs
	lookupEnv func(string) (string, bool)
	// transport carries every request (tests may set their own); nil: http.DefaultTransport.
	transport http.RoundTripper
	// poll is the first wait between two tasks/get of a task that is still working; it
	// doubles up to maxA2APoll.
	poll time.Duration
}

const (
	// a2aCardTimeout bounds reading one remote's card, so one remote that hangs cannot
	// hold the run's tools back.
	a2aCardTimeout = 15 * time.Second
	// a2aCancelTimeout bounds the tasks/cancel sent for a task that outlived its timeout.
	a2aCancelTimeout = 5 * time.Second
	// firstA2APoll and maxA2APoll pace the tasks/get of a task that is still working.
	firstA2APoll = 200 * time.Millisecond
	maxA2APoll   = 5 * time.Second
)

// ErrA2AToken: the environment variable a remote's token_env names is not set here.
var ErrA2AToken = errors.New("A2A token variable not set")

// Register registers the A2A activities.
func (a *A2A) Register(r Registry) {
	r.RegisterActivityWithOptions(a.DescribeA2AAgents, activity.RegisterOptions{Name: api.ActivityDescribeA2AAgents})
	r.RegisterActivityWithOptions(a.CallA2AAgent, activity.RegisterOptions{Name: api.ActivityCallA2AAgent})
}

// CheckA2ATokens says which remote of agent names a token variable that is unset here,
// naming the field (agents[<agent>].a2a[i].token_env): the worker's check at start, so a
// run does not find out at its first call.
func CheckA2ATokens(agent string, remotes []api.A2ARemote, lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var errs []error
	for i, r := range remotes {
		if r.TokenEnv == "" {
			continue
		}
		if v, ok := lookupEnv(r.TokenEnv); !ok || v == "" {
			errs = append(errs, fmt.Errorf("agents[%s].a2a[%d].token_env: remote %s: %s: %w on this worker (set it before the worker starts)",
				agent, i, r.Name, r.TokenEnv, ErrA2AToken))
		}
	}
	return errors.Join(errs...)
}

// DescribeA2AAgents reads the card of each remote (in parallel, each within
// a2aCardTimeout) and returns how each is offered: described by its card's name,
// description and skills, its calls sent to the card's JSON-RPC endpoint. A remote whose
// card cannot be read, or names an endpoint on another origin than its url (which would
// get the token), is still offered, described by its declaration, with the reason in
// Error (the run emits it); its calls go to its url.
func (a *A2A) DescribeA2AAgents(ctx context.Context, req api.DescribeA2AAgentsRequest) (api.DescribeA2AAgentsResult, error) {
	out := make([]api.A2AAgent, len(req.Remotes))
	var wg sync.WaitGroup
	for i, r := range req.Remotes {
		wg.Go(func() { out[i] = a.describe(ctx, r) })
	}
	wg.Wait()
	return api.DescribeA2AAgentsResult{Agents: out}, nil
}

func (a *A2A) describe(ctx context.Context, r api.A2ARemote) api.A2AAgent {
	ag := api.A2AAgent{Remote: r.Name, Endpoint: r.URL, Description: declaredDescription(r)}
	token, err := a.token(r)
	if err != nil {
		ag.Error = err.Error()
		return ag
	}
	cctx, cancel := context.WithTimeout(ctx, a2aCardTimeout)
	defer cancel()
	card, err := agentcard.NewResolver(a.httpClient(token)).Resolve(cctx, r.URL)
	if err != nil {
		ag.Error = redact(fmt.Sprintf("read the agent card of remote %s at %s: %v", r.Name, cardURL(r.URL), unwrapURL(err)), token)
		return ag
	}
	endpoint, err := jsonrpcEndpoint(card)
	if err != nil {
		ag.Error = fmt.Sprintf("remote %s: %v", r.Name, err)
		return ag
	}
	if !sameOrigin(endpoint, r.URL) {
		// The card is the remote's word: an endpoint elsewhere would get the token.
		ag.Error = fmt.Sprintf("remote %s: its card names the endpoint %s, not on %s; calls go to url", r.Name, clipText(endpoint, 300), origin(r.URL))
		return ag
	}
	ag.Endpoint, ag.Card = endpoint, clipText(card.Name, 200)
	ag.Description = redact(cardDescription(card), token)
	return ag
}

// declaredDescription is how a remote is described without its card.
func declaredDescription(r api.A2ARemote) string {
	if d := strings.TrimSpace(r.Description); d != "" {
		return d
	}
	return fmt.Sprintf("It is the remote agent %s at %s.", r.Name, r.URL)
}

// cardDescription describes a remote from its card: name, description and skills,
// within api.MaxA2ADescription.
func cardDescription(card *a2a.AgentCard) string {
	var b strings.Builder
	fmt.Fprintf(&b, "It is the remote agent %q", card.Name)
	if d := strings.TrimSpace(card.Description); d != "" {
		fmt.Fprintf(&b, ": %s", d)
	}
	b.WriteString(".")
	if len(card.Skills) > 0 {
		b.WriteString(" Its skills:")
		for _, s := range card.Skills {
			fmt.Fprintf(&b, " %s", strings.TrimSpace(s.Name))
			if d := strings.TrimSpace(s.Description); d != "" {
				fmt.Fprintf(&b, " (%s)", d)
			}
			b.WriteString(";")
		}
	}
	return clipText(strings.TrimSuffix(b.String(), ";"), api.MaxA2ADescription)
}

// jsonrpcEndpoint is the card's JSON-RPC endpoint: its url when its preferred transport
// is JSON-RPC (or unnamed), else an additional interface of that transport.
func jsonrpcEndpoint(card *a2a.AgentCard) (string, error) {
	if card.PreferredTransport == "" || card.PreferredTransport == a2a.TransportProtocolJSONRPC {
		if card.URL != "" {
			return card.URL, nil
		}
	}
	transports := []string{string(card.PreferredTransport)}
	for _, i := range card.AdditionalInterfaces {
		if i.Transport == a2a.TransportProtocolJSONRPC && i.URL != "" {
			return i.URL, nil
		}
		transports = append(transports, string(i.Transport))
	}
	return "", fmt.Errorf("its card offers no JSON-RPC endpoint (transports: %s); Nexo speaks JSON-RPC only", strings.Join(transports, ", "))
}

// CallA2AAgent sends the call's message to the remote (message/send, not blocking) and
// follows the task with tasks/get until it ends or asks for something, within the
// remote's timeout. What the remote answers is a result the model sees: a completed
// task's artifacts and status message as text, and for a task that ended failed,
// rejected or canceled, or that is input-required or auth-required, an error result
// naming the state and the remote's message. A remote that cannot be reached, or answers
// 5xx, is an activity error Temporal retries; 401, 403 and 404 are not retried.
//
// The message's id is the run's and the call's, the same on every attempt, so a remote
// that recognises a message it already has does not act twice.
func (a *A2A) CallA2AAgent(ctx context.Context, req api.CallA2AAgentRequest) (api.RunToolResult, error) {
	r := req.Remote
	tool := "a2a_" + r.Name
	if strings.TrimSpace(req.Message) == "" {
		return toolError(`%s needs {"message": "<the whole request>"}`, tool), nil
	}
	token, err := a.token(r)
	if err != nil {
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeBadInput, nil)
	}
	endpoint := req.Endpoint
	if endpoint == "" {
		endpoint = r.URL
	}
	if !sameOrigin(endpoint, r.URL) {
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("remote A2A agent %s: endpoint %s is not on %s (its url); the token goes to that origin only", r.Name, endpoint, origin(r.URL)), api.ErrTypeBadInput, nil)
	}
	client, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: endpoint, Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(a.httpClient(token)), a2aclient.WithConfig(a2aclient.Config{Polling: true}))
	if err != nil {
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(
			redact(fmt.Sprintf("remote A2A agent %s: open a client of %s: %v", r.Name, endpoint, err), token), api.ErrTypeBadInput, nil)
	}
	defer func() { _ = client.Destroy() }()

	timeout := r.CallTimeout()
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: req.Message})
	msg.ID = req.RunID + "/" + req.CallID
	msg.ContextID, msg.TaskID = req.ContextID, a2a.TaskID(req.TaskID)
	fail := func(op string, err error) (api.RunToolResult, error) {
		return a.callFailed(ctx, callCtx, r, tool, op, timeout, token, err)
	}
	sent, err := client.SendMessage(callCtx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		return fail("message/send", err)
	}
	var task *a2a.Task
	switch v := sent.(type) {
	case *a2a.Message:
		return a.finish(ctx, req, token, messageAnswer(v))
	case *a2a.Task:
		task = v
	default:
		return toolError("remote A2A agent %s answered message/send with %T, neither a task nor a message", r.Name, sent), nil
	}
	wait := a.poll
	if wait <= 0 {
		wait = firstA2APoll
	}
	for !settled(task.Status.State) {
		select {
		case <-callCtx.Done():
		case <-time.After(wait):
		}
		if callCtx.Err() != nil {
			break
		}
		wait = min(2*wait, maxA2APoll)
		got, err := client.GetTask(callCtx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil {
			if callCtx.Err() != nil && ctx.Err() == nil {
				break
			}
			return fail("tasks/get", err)
		}
		task = got
	}
	if !settled(task.Status.State) {
		if ctx.Err() != nil {
			return api.RunToolResult{}, fmt.Errorf("remote A2A agent %s: task %s: %w", r.Name, task.ID, ctx.Err())
		}
		// The remote's task outlived the timeout: ask it to stop (best effort), and say so.
		cctx, cancelCancel := context.WithTimeout(ctx, a2aCancelTimeout)
		_, cerr := client.CancelTask(cctx, &a2a.TaskIDParams{ID: task.ID})
		cancelCancel()
		asked := "tasks/cancel was sent"
		if cerr != nil {
			asked = "tasks/cancel failed: " + redact(unwrapURL(cerr).Error(), token)
		}
		return toolError("remote A2A agent %s: task %s was still %s after the remote's timeout of %s; the call was abandoned (%s)",
			r.Name, task.ID, task.Status.State, timeout, asked), nil
	}
	return a.finish(ctx, req, token, taskAnswer(r.Name, task))
}

// settled: the task ended, or waits for the caller.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// finish redacts, notes a retry and the human's edit, and stores a long result.
func (a *A2A) finish(ctx context.Context, req api.CallA2AAgentRequest, token string, res api.RunToolResult) (api.RunToolResult, error) {
	res.Content = redact(res.Content, token)
	res = noteRetry(ctx, res)
	if req.Note != "" {
		res.Content, res.Noted = req.Note+res.Content, true
	}
	return a.out.offload(ctx, res, req.StoreOver)
}

// callFailed turns a failed request into what the workflow gets: the remote's own
// answer (a JSON-RPC error, a body that is not one) is an error result the model sees;
// 401, 403, 404 and other 4xx are final activity errors, and a remote that cannot be
// reached or answers 5xx a retryable one. A call past the remote's timeout is an error
// result naming it.
func (a *A2A) callFailed(ctx, callCtx context.Context, r api.A2ARemote, tool, op string, timeout time.Duration, token string, err error) (api.RunToolResult, error) {
	if ctx.Err() != nil {
		return api.RunToolResult{}, fmt.Errorf("remote A2A agent %s: %s: %w", r.Name, op, ctx.Err())
	}
	if callCtx.Err() != nil {
		return toolError("remote A2A agent %s: %s: no answer within the remote's timeout of %s; the call was abandoned (it may still be running there)", r.Name, op, timeout), nil
	}
	msg := redact(fmt.Sprintf("remote A2A agent %s: %s: %v", r.Name, op, unwrapURL(err)), token)
	var st *httpStatusError
	switch {
	case errors.As(err, &st) && (st.code == http.StatusUnauthorized || st.code == http.StatusForbidden):
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(msg+" (check the token its token_env names)", api.ErrTypeBadInput, nil)
	case errors.As(err, &st) && st.code == http.StatusNotFound:
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(msg+" (check its url)", api.ErrTypeNotFound, nil)
	case errors.As(err, &st) && st.code >= 500:
		return api.RunToolResult{}, temporal.NewApplicationError(msg, api.ErrTypeA2ATransport, nil)
	case errors.As(err, &st):
		return api.RunToolResult{}, temporal.NewNonRetryableApplicationError(msg, api.ErrTypeBadInput, nil)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return api.RunToolResult{}, temporal.NewApplicationError(msg, api.ErrTypeA2ATransport, nil)
	}
	return toolError("%s", msg), nil
}

// taskAnswer is what the model sees of a settled task.
func taskAnswer(remote string, t *a2a.Task) api.RunToolResult {
	ids := fmt.Sprintf("[A2A task %s, context %s: %s]", t.ID, t.ContextID, t.Status.State)
	status := ""
	if t.Status.Message != nil {
		status = partsText(t.Status.Message.Parts)
	}
	switch t.Status.State {
	case a2a.TaskStateCompleted:
		var texts []string
		for _, art := range t.Artifacts {
			if art != nil {
				if s := partsText(art.Parts); s != "" {
					texts = append(texts, s)
				}
			}
		}
		if status != "" {
			texts = append(texts, status)
		}
		if len(texts) == 0 {
			texts = append(texts, "(the remote agent answered with no text)")
		}
		return api.RunToolResult{Content: strings.Join(texts, "\n\n") + "\n\n" + ids}
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		if status == "" {
			status = "(no message)"
		}
		return toolError("remote A2A agent %s: task %s is %s: %s\n(answer it with task_id %q and context_id %q) %s",
			remote, t.ID, t.Status.State, status, t.ID, t.ContextID, ids)
	}
	if status == "" {
		status = "(no message)"
	}
	return toolError("remote A2A agent %s: task %s ended %s: %s %s", remote, t.ID, t.Status.State, status, ids)
}

// messageAnswer is what the model sees of a remote that answered with a message.
func messageAnswer(m *a2a.Message) api.RunToolResult {
	text := partsText(m.Parts)
	if text == "" {
		text = "(the remote agent answered with no text)"
	}
	return api.RunToolResult{Content: text + "\n\n" + fmt.Sprintf("[A2A message, context %s]", m.ContextID)}
}

// partsText joins the text of parts: text as is, data as JSON, a file by its name.
func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			if v.Text != "" {
				out = append(out, v.Text)
			}
		case a2a.DataPart:
			if b, err := json.Marshal(v.Data); err == nil {
				out = append(out, string(b))
			}
		case a2a.FilePart:
			out = append(out, fileSummary(v.File))
		}
	}
	return strings.Join(out, "\n")
}

func fileSummary(f a2a.FilePartContent) string {
	switch v := f.(type) {
	case a2a.FileURI:
		return fmt.Sprintf("[file %s (%s) at %s]", v.Name, v.MimeType, v.URI)
	case a2a.FileBytes:
		return fmt.Sprintf("[file %s (%s), %d base64 characters, not shown]", v.Name, v.MimeType, len(v.Bytes))
	}
	return "[file]"
}

// token is the remote's bearer token, "" when it has none.
func (a *A2A) token(r api.A2ARemote) (string, error) {
	if r.TokenEnv == "" {
		return "", nil
	}
	lookup := a.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(r.TokenEnv) // the worker took its secrets out of the environment at start
	if !ok || v == "" {
		return "", fmt.Errorf("remote A2A agent %s: %w: token_env names %s, which is not set (or is empty) in the worker's environment; set it where the worker runs",
			r.Name, ErrA2AToken, r.TokenEnv)
	}
	return v, nil
}

// httpClient sends token (when set) with every request and makes every answer other than
// 2xx an httpStatusError, so a status is told apart from the remote's own JSON-RPC errors.
func (a *A2A) httpClient(token string) *http.Client {
	base := a.transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: a2aTransport{base: base, token: token}}
}

type a2aTransport struct {
	base  http.RoundTripper
	token string
}

func (t a2aTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = resp.Body.Close()
		return nil, &httpStatusError{code: resp.StatusCode, status: resp.Status}
	}
	return resp, nil
}

// httpStatusError: the remote answered with a status other than 2xx.
type httpStatusError struct {
	code   int
	status string
}

func (e *httpStatusError) Error() string { return "the remote answered " + e.status }

// unwrapURL drops net/http's "Post "<url>": " wrapping, which repeats the endpoint.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		var st *httpStatusError
		if errors.As(ue.Err, &st) {
			return st
		}
	}
	return err
}

// cardURL is where the card of a remote with base URL base is read.
func cardURL(base string) string {
	return strings.TrimRight(base, "/") + a2asrvCardPath
}

// a2asrvCardPath is A2A's well-known path of an agent card.
const a2asrvCardPath = "/.well-known/agent-card.json"

// clipText cuts s to at most n bytes at a UTF-8 boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// origin is a URL's scheme and host ("https://weather.example.com:8443"), "" when it
// does not parse.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// sameOrigin: a and b have one scheme and host, so a request to a may carry what the
// declaration of b entrusts (its token).
func sameOrigin(a, b string) bool {
	oa := origin(a)
	return oa != "" && oa == origin(b)
}
