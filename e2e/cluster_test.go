package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/cluster"
	"github.com/nexo-temporal/nexo/payloads"
)

// The fault tests run on a real cluster (package internal/cluster): PostgreSQL, the official
// Temporal server built from go.temporal.io/server with PostgreSQL persistence and
// visibility, mutual TLS on the frontend, and three worker processes. Each fault asserts
// nothing lost (every run ends done with the expected result) and nothing repeated (a
// checkpoint's work done once, a tool's side effect counted: at-least-once is documented, so
// a tool interrupted mid-way may run twice, never a completed one).

// requireCluster skips without PostgreSQL, except in CI (CI=true), where it fails.
func requireCluster(t *testing.T) {
	t.Helper()
	if cluster.HavePostgres() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(cluster.ErrNoPostgres)
	}
	t.Skip(cluster.ErrNoPostgres)
}

// clusterEffects is where the fault tests' shell tools append one line per side effect.
func clusterEffects(dir string) string { return filepath.Join(dir, "effects.log") }

// clusterAgentConfig is the workers' config: agents on local sandboxes (one per run under the
// worker's sandbox root), one that needs approval to write, a session agent, and (when the
// image is there) one on a Docker sandbox.
func clusterAgentConfig(modelURL string, docker bool) string {
	y := `llm:
  base_url: ` + modelURL + `
  model: fake-model
agents:
  - name: filer
    instructions: You keep files.
    permissions: {mode: auto}
    sandbox: {type: local}
    max_turns: 8
  - name: approver
    instructions: You write files when a human agrees.
    permissions: {mode: approve}
    sandbox: {type: local}
    max_turns: 5
  - name: assistant
    instructions: You are a helpful assistant.
`
	if docker {
		y += `  - name: boxer
    instructions: You keep files in a box.
    permissions: {mode: auto}
    sandbox: {type: docker, image: "nexo-sandbox:busybox"}
    max_turns: 8
`
	}
	return y
}

// clusterScript answers each fault's agent by its prompt (fakellm Prompt sequences).
func clusterScript(effects string) []fakellm.Reply {
	appendLine := func(tag string) string { return "echo " + tag + " >> " + effects }
	write := func(path, content string) fakellm.Call {
		args, _ := json.Marshal(map[string]string{"path": path, "content": content})
		return fakellm.Call{Name: "write_file", Arguments: args}
	}
	read := func(path string) fakellm.Call {
		args, _ := json.Marshal(map[string]string{"path": path})
		return fakellm.Call{Name: "read_file", Arguments: args}
	}
	var s []fakellm.Reply
	add := func(prompt string, replies ...fakellm.Reply) {
		for _, r := range replies {
			r.Prompt = prompt
			s = append(s, r)
		}
	}
	// A model call held 4 s (the worker is killed during it), then files written and read.
	add("fault model-call",
		fakellm.Reply{ToolCalls: []fakellm.Call{write("a.txt", "alpha"), shellCall(appendLine("model-call"))}, DelayMS: 4000},
		fakellm.Reply{ToolCalls: []fakellm.Call{read("a.txt")}},
		fakellm.Reply{Content: "model-call done"})
	// A shell tool that takes 4 s (the worker is killed during it).
	add("fault tool-call",
		fakellm.Reply{ToolCalls: []fakellm.Call{write("b.txt", "beta")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{shellCall(appendLine("tool-start") + "; sleep 4; " + appendLine("tool-end") + "; cat b.txt")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{read("b.txt")}},
		fakellm.Reply{Content: "tool-call done"})
	// Waits for approval of a write; the workers are killed while it waits.
	add("fault approval",
		fakellm.Reply{ToolCalls: []fakellm.Call{write("c.txt", "gamma")}},
		fakellm.Reply{ToolCalls: []fakellm.Call{read("c.txt")}},
		fakellm.Reply{Content: "approval done"})
	// Runs across a server or PostgreSQL restart: five tool calls.
	for _, tag := range []string{"server", "postgres", "frozen", "docker"} {
		add("fault "+tag,
			fakellm.Reply{ToolCalls: []fakellm.Call{write("d.txt", tag), shellCall(appendLine(tag + "-1"))}},
			fakellm.Reply{ToolCalls: []fakellm.Call{shellCall("sleep 1; " + appendLine(tag+"-2")), read("d.txt")}, DelayMS: 1500},
			fakellm.Reply{ToolCalls: []fakellm.Call{read("d.txt")}},
			fakellm.Reply{Content: tag + " done"})
	}
	// A session turn streamed slowly (the worker is killed while it streams).
	add("fault stream",
		fakellm.Reply{Content: strings.Repeat("streaming words for a while ", 12) + "end.", ChunkDelayMS: 80})
	return s
}

// clusterPlatform is a platform whose starter talks to the cluster (its worker is the
// cluster's, so start() is never called).
func clusterPlatform(t *testing.T, c *cluster.Cluster) *platform {
	p := newPlatform(t)
	p.extraEnv = c.Env()
	return p
}

// clusterClient dials the cluster as the starter does (TLS, External Storage on the shared
// artifact store).
func clusterClient(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	o, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	store, err := artifacts.Open(c.ArtifactsDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	o.ExternalStorage = payloads.ExternalStorage(store, 0)
	cl, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// holder waits until run id has a started activity of a type containing actType and returns
// the worker that runs it.
func holder(t *testing.T, c *cluster.Cluster, cl client.Client, id, actType string) *cluster.Worker {
	t.Helper()
	w, _ := holderOf(t, c, cl, id, actType)
	return w
}

// holderOf is holder with the activity Temporal describes as started there.
func holderOf(t *testing.T, c *cluster.Cluster, cl client.Client, id, actType string) (*cluster.Worker, *workflowpb.PendingActivityInfo) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d, err := cl.DescribeWorkflowExecution(context.Background(), id, "")
		if err == nil {
			for _, pa := range d.GetPendingActivities() {
				if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && strings.Contains(pa.GetActivityType().GetName(), actType) {
					name := c.WorkerOf(pa.GetLastWorkerIdentity())
					for _, w := range c.Workers() {
						if w.Name == name {
							return w, pa
						}
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s: no started %s activity within 60s", id, actType)
	return nil, nil
}

// effectLines counts the lines tag was appended to the effects log.
func effectLines(t *testing.T, dir, tag string) int {
	t.Helper()
	b, err := os.ReadFile(clusterEffects(dir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == tag {
			n++
		}
	}
	return n
}

// clusterToolResults are the results of the run's tool calls named name, in order.
func clusterToolResults(rec api.Record, name string) []string {
	names := map[string]string{}
	var out []string
	for _, e := range rec.Events {
		var d struct {
			CallID  string `json:"call_id"`
			Name    string `json:"name"`
			Content string `json:"content"`
		}
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case "agent_tool_call":
			names[d.CallID] = d.Name
		case "agent_tool_result":
			if names[d.CallID] == name || d.Name == name {
				out = append(out, d.Content)
			}
		}
	}
	return out
}

// agentDone waits for run id to be done with content want, every read_file having seen its
// file (the run kept its workspace throughout).
func agentDone(t *testing.T, p *platform, c *cluster.Cluster, id, want string, reads map[string]string) api.Record {
	t.Helper()
	rec := waitStatusWithin(t, p, id, api.StatusDone, 3*time.Minute, c)
	var res api.AgentResult
	_ = json.Unmarshal(rec.Result, &res)
	if res.Content != want {
		t.Errorf("run %s: result %s, want content %q", id, rec.Result, want)
	}
	got := strings.Join(clusterToolResults(rec, "read_file"), "\n")
	for file, content := range reads {
		if !strings.Contains(got, content) {
			t.Errorf("run %s: read_file of %s did not see %q (its workspace was lost on the way): %s", id, file, content, got)
		}
	}
	return rec
}

// waitStatusWithin is waitStatus with a longer deadline (a fault costs a heartbeat timeout),
// printing the workers' output when it fails.
func waitStatusWithin(t *testing.T, p *platform, id string, want api.Status, d time.Duration, c *cluster.Cluster) api.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := p.starter("show", id, "--json")
		var rec api.Record
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &rec) == nil {
			if rec.Status == want {
				return rec
			}
			if rec.Status == api.StatusFailed || rec.Status == api.StatusInterrupted {
				t.Fatalf("run %s ended %s, want %s: %s\n%s", id, rec.Status, want, errText(rec.Error), clusterLogs(c))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: status %s (%s), want %s after %s\n%s", id, rec.Status, strings.TrimSpace(r.stderr), want, d, clusterLogs(c))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clusterLogs(c *cluster.Cluster) string {
	var b strings.Builder
	for _, w := range c.Workers() {
		b.WriteString("--- worker " + w.Name + ":\n" + lastLines(w.Output(), 15) + "\n")
	}
	return b.String()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// startAgent starts agent with prompt and returns the run id.
func startAgent(t *testing.T, p *platform, agent, prompt string) string {
	t.Helper()
	return strings.TrimSpace(p.ok("agent", agent, prompt))
}

// TestClusterFaults runs the fault tests, one after another, on one cluster.
//
// The faults share the cluster, so they run in sequence; the test as a whole runs beside the
// other parallel tests (it is the longest of the package, minutes, mostly waiting out
// heartbeat timeouts). Nothing it kills or partitions is another test's: its PostgreSQL,
// server, workers and network namespace are its own, and its Docker containers carry its own
// deployment scope, while the other Docker tests are serial and so done before it starts.
func TestClusterFaults(t *testing.T) {
	t.Parallel()
	requireCluster(t)
	dir := t.TempDir()
	docker := exec.Command("docker", "image", "inspect", "nexo-sandbox:busybox").Run() == nil
	model := fakellm.New(append(clusterScript(clusterEffects(dir)), partitionScript(clusterEffects(dir))...)...)
	modelURL := model.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{
		Dir: dir, RepoDir: "..", WorkerBin: bins.worker, StarterBin: bins.starter, Workers: 3,
		WorkerConfig: clusterAgentConfig(modelURL, docker), TLS: true,
		// The frontend on every address: the partition test's worker, in a network namespace
		// of its own, reaches it through its veth.
		Isolatable: true,
		// A snapshot after every write: a run moved off a killed host finds every file it
		// wrote before the kill (sandbox.park_every; by default a lost host loses what it
		// held since the last snapshot, up to 5 minutes).
		// The heartbeat and host timeouts at 1 s (fastFailover): every fault below waits
		// for Temporal to give up on a silent worker, about a second instead of 10.
		Env:     append([]string{"NEXO_SANDBOX_PARK_EVERY=1ms"}, fastFailover...),
		Gateway: true,
		UI:      true, // the Temporal Web UI as its own process (internal/cluster/cmd/ui), over mTLS
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	cl := clusterClient(t, c)

	t.Run("mTLS: the frontend refuses a client without a certificate", func(t *testing.T) {
		p := clusterPlatform(t, c)
		o, _ := c.ClientOptions()
		o.ConnectionOptions.TLS = &tls.Config{InsecureSkipVerify: true}
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if bad, err := client.DialContext(dctx, o); err == nil {
			_, err = bad.CheckHealth(dctx, &client.CheckHealthRequest{})
			bad.Close()
			if err == nil {
				t.Fatal("a client without a certificate was served")
			}
		}
		o.ConnectionOptions.TLS = nil
		if bad, err := client.DialContext(dctx, o); err == nil {
			bad.Close()
			t.Fatal("a plaintext client was served")
		}
		// The starter with the temporal.tls.* keys is served (every test below uses it).
		p.ok("list")
	})

	t.Run("the Web UI lists a run the test started", func(t *testing.T) {
		p := clusterPlatform(t, c)
		doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"web-ui"}`))
		waitUIListsRun(t, c, doc)
		waitStatusWithin(t, p, doc, api.StatusSuspended, time.Minute, c)
		approveSoon(t, p, doc)
		waitStatusWithin(t, p, doc, api.StatusDone, time.Minute, c)
	})

	t.Run("worker killed during a model call", func(t *testing.T) {
		p := clusterPlatform(t, c)
		id := startAgent(t, p, "filer", "fault model-call")
		w := holder(t, c, cl, id, api.ActivityCompleteChat)
		w.Kill()
		defer func() { _ = w.Start(ctx) }()
		rec := agentDone(t, p, c, id, "model-call done", map[string]string{"a.txt": "alpha"})
		if n := effectLines(t, dir, "model-call"); n != 1 {
			t.Errorf("the tool after the interrupted model call ran %d times, want 1", n)
		}
		if n := countEvents(rec, "agent_usage"); n != 3 {
			t.Errorf("agent_usage events = %d, want 3 (each model call paid for once)", n)
		}
	})

	t.Run("worker killed during a tool call", func(t *testing.T) {
		p := clusterPlatform(t, c)
		id := startAgent(t, p, "filer", "fault tool-call")
		deadline := time.Now().Add(time.Minute)
		for effectLines(t, dir, "tool-start") == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the slow tool did not start within a minute\n%s", clusterLogs(c))
			}
			time.Sleep(20 * time.Millisecond)
		}
		w := holder(t, c, cl, id, api.ActivityRunTool) // the slow shell call, now running
		w.Kill()
		defer func() { _ = w.Start(ctx) }()
		agentDone(t, p, c, id, "tool-call done", map[string]string{"b.txt": "beta"})
		starts, ends := effectLines(t, dir, "tool-start"), effectLines(t, dir, "tool-end")
		if ends != 1 {
			t.Errorf("the interrupted tool completed %d times, want 1", ends)
		}
		if starts != 2 {
			t.Errorf("the interrupted tool started %d times, want 2 (at-least-once: the kill interrupted the first)", starts)
		}
	})

	t.Run("every worker killed while a run waits for approval", func(t *testing.T) {
		p := clusterPlatform(t, c)
		doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"cluster"}`))
		agent := startAgent(t, p, "approver", "fault approval")
		waitStatusWithin(t, p, doc, api.StatusSuspended, time.Minute, c)
		waitStatusWithin(t, p, agent, api.StatusSuspended, time.Minute, c)
		for _, w := range c.Workers() {
			w.Kill()
		}
		for _, w := range c.Workers() {
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Right after every worker restarted, a query waits out the dead workers' sticky
		// queues (Temporal's sticky poller window, ~10 s) before a new worker answers it: the
		// starter's 5 s query times out and says no worker answered; the next try works.
		approveSoon(t, p, doc)
		approveSoon(t, p, agent)
		rec := waitStatusWithin(t, p, doc, api.StatusDone, time.Minute, c)
		if n := countEvents(rec, "fetching"); n != 1 {
			t.Errorf("DocumentApproval fetched %d times, want 1", n)
		}
		agentDone(t, p, c, agent, "approval done", map[string]string{"c.txt": "gamma"})
		// The gateway (starter serve, over the same mTLS connection) reads the run too.
		resp, err := http.Get(c.GatewayURL() + "/v1/runs/" + doc)
		if err != nil {
			t.Fatal(err)
		}
		var viaAPI api.Record
		_ = json.NewDecoder(resp.Body).Decode(&viaAPI)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || viaAPI.Status != api.StatusDone {
			t.Errorf("gateway GET /v1/runs/%s: %d, status %q", doc, resp.StatusCode, viaAPI.Status)
		}
	})

	t.Run("worker killed while a session turn streams", func(t *testing.T) {
		p := clusterPlatform(t, c)
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		r := p.startStarter(sctx, "session", "prompt", "assistant", "fault", "fault stream")
		w := holder(t, c, cl, api.SessionIDPrefix+"assistant:fault", api.ActivityCompleteChat)
		streamed := model.StreamedWords()
		pollUntil(t, time.Minute, "a few words of the reply streamed", func(context.Context) error {
			if n := model.StreamedWords() - streamed; n < 5 {
				return fmt.Errorf("%d words streamed, want 5", n)
			}
			return nil
		})
		w.Kill()
		defer func() { _ = w.Start(ctx) }()
		if err := r.Wait(); err != nil {
			t.Fatalf("session prompt: %v\n%s\n%s", err, r.Stdout(), r.Stderr())
		}
		want := strings.Repeat("streaming words for a while ", 12) + "end."
		if got := strings.TrimSpace(r.Stdout()); !strings.HasSuffix(got, "end.") || strings.Count(got, "end.") != 1 {
			t.Errorf("session reply = %q, want %q once", got, want)
		}
		show := p.ok("session", "show", "assistant", "fault")
		if n := strings.Count(show, "end."); n != 1 {
			t.Errorf("session thread holds the reply %d times, want 1:\n%s", n, show)
		}
	})

	t.Run("worker frozen past its heartbeat timeout and back", func(t *testing.T) {
		p := clusterPlatform(t, c)
		id := startAgent(t, p, "filer", "fault frozen")
		w, call := holderOf(t, c, cl, id, api.ActivityCompleteChat)
		w.Pause()
		// Frozen until the server gives up on it (past the 1 s heartbeat timeout): the call
		// is retried (a later attempt) or already done elsewhere.
		pollUntil(t, time.Minute, "the frozen worker's model call retried elsewhere", func(ctx context.Context) error {
			d, err := cl.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return err
			}
			for _, pa := range d.GetPendingActivities() {
				if pa.GetActivityId() == call.GetActivityId() && pa.GetAttempt() == call.GetAttempt() {
					return fmt.Errorf("attempt %d still pending (%s)", pa.GetAttempt(), pa.GetState())
				}
			}
			return nil
		})
		w.Resume()
		agentDone(t, p, c, id, "frozen done", map[string]string{"d.txt": "frozen"})
		for _, tag := range []string{"frozen-1", "frozen-2"} {
			if n := effectLines(t, dir, tag); n != 1 {
				t.Errorf("tool %s ran %d times, want 1", tag, n)
			}
		}
	})

	t.Run("worker partitioned from the network and back", func(t *testing.T) {
		clusterPartition(t, ctx, c, cl, dir, modelURL)
	})

	for _, fault := range []struct {
		name string
		tag  string
		do   func() error
	}{
		{"Temporal server restarted", "server", func() error { return c.RestartServer(ctx) }},
		{"PostgreSQL restarted", "postgres", func() error { return c.RestartPostgres(ctx, 2*time.Second) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			p := clusterPlatform(t, c)
			doc := strings.TrimSpace(p.ok("run", "DocumentApproval", "--input", `{"doc_id":"`+fault.tag+`"}`))
			id := startAgent(t, p, "filer", "fault "+fault.tag)
			holder(t, c, cl, id, api.ActivityCompleteChat)
			if err := fault.do(); err != nil {
				t.Fatal(err)
			}
			agentDone(t, p, c, id, fault.tag+" done", map[string]string{"d.txt": fault.tag})
			for _, tag := range []string{fault.tag + "-1", fault.tag + "-2"} {
				if n := effectLines(t, dir, tag); n != 1 {
					t.Errorf("tool %s ran %d times, want 1", tag, n)
				}
			}
			waitStatusWithin(t, p, doc, api.StatusSuspended, time.Minute, c)
			approveSoon(t, p, doc)
			rec := waitStatusWithin(t, p, doc, api.StatusDone, time.Minute, c)
			if n := countEvents(rec, "fetching"); n != 1 {
				t.Errorf("DocumentApproval fetched %d times, want 1", n)
			}
			waitUIListsRun(t, c, doc) // the Web UI, left running, is served again
		})
	}

	t.Run("docker sandbox: worker killed, files kept", func(t *testing.T) {
		p := clusterPlatform(t, c)
		if !docker {
			requireSandboxImage(t)
		}
		id := startAgent(t, p, "boxer", "fault docker")
		w := holder(t, c, cl, id, api.ActivityRunTool)
		w.Kill()
		defer func() { _ = w.Start(ctx) }()
		agentDone(t, p, c, id, "docker done", map[string]string{"d.txt": "docker"})
		if left := runContainers(t, id); len(left) != 0 {
			t.Errorf("containers left after the run: %v", left)
		}
	})
}

// errText is a record's error ("" when none).
func errText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// approveSoon approves run id, trying again for up to a minute while no worker answers its
// query yet (just after a restart).
func approveSoon(t *testing.T, p *platform, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := p.starter("approve", id)
		if r.code == 0 {
			return
		}
		if !strings.Contains(r.stderr, "no worker answered") || time.Now().After(deadline) {
			t.Fatalf("starter approve %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
		}
		time.Sleep(time.Second)
	}
}

// waitUIListsRun waits until the cluster's Web UI lists workflow id in its namespace: the UI
// server's API (/api/v1/namespaces/<ns>/workflows, what its page reads) proxies
// ListWorkflowExecutions to the frontend over the cluster's mTLS.
func waitUIListsRun(t *testing.T, c *cluster.Cluster, id string) {
	t.Helper()
	if c.UIURL() == "" {
		t.Fatal("the cluster runs no Web UI (Options.UI)")
	}
	u := c.UIURL() + "/api/v1/namespaces/" + url.PathEscape(c.Namespace()) + "/workflows?query=" +
		url.QueryEscape("WorkflowId = '"+id+"'")
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
		}
		var list struct {
			Executions []struct {
				Execution struct{ WorkflowID, RunID string } `json:"execution"`
				Type      struct{ Name string }              `json:"type"`
			} `json:"executions"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, body)
		}
		for _, e := range list.Executions {
			if e.Execution.WorkflowID == id {
				if e.Type.Name != "DocumentApproval" {
					t.Errorf("the Web UI lists %s as a %q, want DocumentApproval", id, e.Type.Name)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Web UI did not list %s within 30s; last answer:\n%s", id, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
