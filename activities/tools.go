package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/sandbox"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// Tool limits (Nexo's): a read returns at most ReadCap bytes; shell output keeps the last
// ShellLines lines / ShellChars characters of each stream, without ANSI codes.
const (
	ReadCap         = 200_000
	maxReadableFile = 16 << 20
	ShellLines      = sandbox.DefaultOutputLines
	ShellChars      = sandbox.DefaultOutputChars
	maxGlobResults  = 1000
	defaultShellSec = 60
)

// ResolveAgent returns the configured definition of the agent called name.
func (a *Model) ResolveAgent(_ context.Context, name string) (agents.Spec, error) {
	if s, ok := a.agents[name]; ok {
		return a.withEndpoint(a.withNotify(a.withRetryBudget(withEgressAgent(s.WithMaxDepth(a.maxDepth))))), nil
	}
	known := make([]string, 0, len(a.agents))
	for n := range a.agents {
		known = append(known, n)
	}
	sort.Strings(known)
	list := strings.Join(known, ", ")
	if list == "" {
		list = "none; add agents: to the worker's config"
	}
	// Non-retryable here: the workflow sees at once which worker lacked it (the failure
	// carries its identity) and decides whether to try another (workflows/agentavail.go).
	return agents.Spec{}, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no agent %q is configured on this worker (configured: %s)", name, list),
		api.ErrTypeAgentUnavailable, nil)
}

// withEgressAgent names the agent in its egress spec, for the proxy's refusals; a copy, so
// the configured spec stays as it was.
func withEgressAgent(s agents.Spec) agents.Spec {
	if e := s.Sandbox.Egress; e != nil && e.Agent == "" {
		c := *e
		c.Agent = s.Name
		s.Sandbox.Egress = &c
	}
	return s
}

// headUTF8 returns s cut to at most n bytes, moved back to the start of a character when n
// falls inside one (at most 3 bytes back; bytes that are not UTF-8 are cut where they are).
func headUTF8[T ~string | ~[]byte](s T, n int) T {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i > n-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = n
	}
	return s[:i]
}

func toolError(format string, args ...any) api.RunToolResult {
	return api.RunToolResult{Content: "error: " + fmt.Sprintf(format, args...), IsError: true}
}

// RunTool runs one built-in tool in the run's sandbox. A tool that runs and fails
// (missing file, escaping path, failing command, refused URL) is a result the model sees;
// only a sandbox that cannot be reached is an activity error, retried by Temporal.
//
// The agent's tool hooks (req.Hooks) run first and last: a denial is the result, and the
// tool never runs; After sees the result of a call that ran before it is stored.
func (a *Tools) RunTool(ctx context.Context, req api.RunToolRequest) (res api.RunToolResult, err error) {
	var sb sandbox.Sandbox
	call := ToolCall{RunID: req.RunID, CallID: req.CallID, Tool: req.Tool, Args: req.Args}
	var hooked []api.ToolHookNote
	ran := false
	var listed *preListing // the workspace as the shell call's own round trip listed it
	defer func() {
		if errors.Is(err, docker.ErrContainerGone) {
			a.sandboxes.Forget(req.RunID, req.Sandbox)
		}
		if err == nil && ran && len(req.Hooks) > 0 {
			res = a.hooks.after(ctx, req.Hooks, call, res, hooked)
		}
		if err == nil && req.Snapshot && snapshotTool(req.Tool) && sb != nil {
			started := time.Now()
			res.Snapshot, res.SnapshotError, err = a.host.snapshotAfter(ctx, req, sb, listed)
			phaseSince(ctx, PhaseSnapshot, started)
		}
		if err == nil {
			res = noteRetry(ctx, res)
			res.Content = req.Note + res.Content
			res, err = a.out.offload(ctx, res, req.StoreOver)
		}
	}()
	if len(req.Hooks) > 0 {
		var stop *api.RunToolResult
		if hooked, stop = a.hooks.before(ctx, req.Hooks, &call); stop != nil {
			return *stop, nil
		}
		req.Args = call.Args
	}
	ran = true
	opened := time.Now()
	sb, rebuilt, err := a.sandboxes.OpenFrom(ctx, req.RunID, req.Sandbox, req.Base)
	phaseSince(ctx, PhaseOpen, opened)
	if err != nil {
		sb = nil
		return api.RunToolResult{}, classify(fmt.Errorf("tool %s: %w", req.Tool, err))
	}
	defer func() {
		if err == nil {
			res.Rebuilt = rebuilt
		}
	}()
	var args map[string]any
	if err := json.Unmarshal(req.Args, &args); err != nil {
		return toolError("arguments are not a JSON object: %v", err), nil
	}
	str := func(k string) (string, bool) { s, ok := args[k].(string); return s, ok }
	switch req.Tool {
	case agents.ToolReadFile:
		p, ok := str("path")
		if !ok || p == "" {
			return toolError("read_file needs a string \"path\""), nil
		}
		return a.readFile(ctx, sb, p)
	case agents.ToolWriteFile:
		p, ok := str("path")
		content, ok2 := str("content")
		if !ok || p == "" || !ok2 {
			return toolError("write_file needs a string \"path\" and a string \"content\""), nil
		}
		return a.writeFile(ctx, sb, p, content, req.Seen)
	case agents.ToolGlob:
		pat, ok := str("pattern")
		if !ok || pat == "" {
			return toolError("glob needs a string \"pattern\""), nil
		}
		files, err := sb.Glob(ctx, pat)
		if err != nil {
			return fileError("glob", pat, err)
		}
		files = relativeTo(req.Dir, files)
		if len(files) == 0 {
			return api.RunToolResult{Content: "no files match " + pat}, nil
		}
		more := ""
		if len(files) > maxGlobResults {
			more = fmt.Sprintf("\n[%d more not shown]", len(files)-maxGlobResults)
			files = files[:maxGlobResults]
		}
		return api.RunToolResult{Content: strings.Join(files, "\n") + more}, nil
	case agents.ToolShell:
		cmd, ok := str("command")
		if !ok || strings.TrimSpace(cmd) == "" {
			return toolError("shell needs a string \"command\""), nil
		}
		timeout := time.Duration(defaultShellSec) * time.Second
		if n, ok := args["timeout_seconds"].(float64); ok && n >= 1 {
			timeout = time.Duration(min(n, 86400)) * time.Second // clamped first: a huge n would overflow past the cap
		}
		timeout = min(timeout, a.shellTimeout)
		started := time.Now()
		// A snapshot follows: a tier that can list the workspace in the command's own
		// round trip does, and the snapshot uses that listing.
		list := req.Snapshot && snapshotEligible(req.Sandbox)
		var res api.RunToolResult
		res, listed, err = a.shell(ctx, sb, inDir(req.Dir, cmd), timeout, list)
		phaseSince(ctx, PhaseCommand, started)
		if err == nil {
			// What the command asked of the egress proxy: the workflow records an egress
			// event for each (workflows/hostq.go).
			res.Egress, res.EgressDropped = a.sandboxes.DrainEgress(req.RunID, req.Sandbox)
		}
		return res, err
	case agents.ToolFetch:
		u, ok := str("url")
		if !ok || u == "" {
			return toolError("fetch needs a string \"url\""), nil
		}
		return a.fetcher.Fetch(ctx, u, req.FetchAllow), nil
	case agents.ToolWebSearch:
		q, ok := str("query")
		if !ok || strings.TrimSpace(q) == "" {
			return toolError("web_search needs a string \"query\""), nil
		}
		if a.searcher == nil {
			return toolError("web_search: this worker has no search backend (search.url)"), nil
		}
		return a.searcher.Search(ctx, q), nil
	}
	return toolError("unknown tool %q", req.Tool), nil
}

// inDir is cmd run from dir, a directory relative to the workspace (a session prompt's
// dir); "" runs it in the workspace. The command is unchanged, so it runs in the same
// shell after the cd; a dir that is missing fails the call with a message naming it.
func inDir(dir, cmd string) string {
	if dir == "" {
		return cmd
	}
	q := "'" + strings.ReplaceAll(dir, "'", `'\''`) + "'"
	return "cd -- " + q + " 2>/dev/null || { echo \"nexo: the turn's working directory \"" + q + "\" is not a directory of the workspace\" >&2; exit 1; }\n" + cmd
}

// relativeTo gives glob's workspace-relative matches relative to dir (a session prompt's
// dir), where the model works; a match outside dir keeps its workspace path.
func relativeTo(dir string, files []string) []string {
	if dir == "" {
		return files
	}
	out := make([]string, len(files))
	for i, f := range files {
		if rest, ok := strings.CutPrefix(f, dir+"/"); ok {
			f = rest
		}
		out[i] = f
	}
	return out
}

// noteRetry tells the model when this call is a retry: an earlier attempt, on a worker
// that died or lost its sandbox, may have run partly (a command half done, a file already
// written), and the model should check before it repeats or builds on the call.
func noteRetry(ctx context.Context, res api.RunToolResult) api.RunToolResult {
	if !activity.IsActivity(ctx) {
		return res
	}
	if n := activity.GetInfo(ctx).Attempt; n > 1 {
		res.Content = fmt.Sprintf("note: this call is a retry (attempt %d): an earlier attempt may have run partly\n", n) + res.Content
	}
	return res
}

// fileError turns a sandbox error into what the model sees; an error that is neither the
// model's fault nor a plain failure (I/O on the worker) is returned for Temporal to retry.
func fileError(op, p string, err error) (api.RunToolResult, error) {
	switch {
	case errors.Is(err, sandbox.ErrEscape):
		return toolError("%s %s: the path leads outside the workspace", op, p), nil
	case errors.Is(err, sandbox.ErrNotFound):
		return toolError("%s %s: no such file", op, p), nil
	case errors.Is(err, sandbox.ErrNotRegular):
		return toolError("%s %s: %v; file tools read and write only regular files", op, p, err), nil
	case errors.Is(err, sandbox.ErrNoShell):
		return toolError("%s: this sandbox has no shell", op), nil
	case errors.Is(err, sandbox.ErrClosed), errors.Is(err, docker.ErrContainerGone):
		// Not the model's doing: Temporal retries, and the retry gets a fresh sandbox.
		return api.RunToolResult{}, fmt.Errorf("%s %s: %w", op, p, err)
	}
	return toolError("%s %s: %v", op, p, err), nil
}

func stampOf(fi sandbox.FileInfo) *api.FileStamp {
	return &api.FileStamp{Size: fi.Size, ModUnix: fi.ModTime.UnixNano()}
}

func (a *Tools) readFile(ctx context.Context, sb sandbox.Sandbox, p string) (api.RunToolResult, error) {
	fi, err := sb.Stat(ctx, p)
	if err != nil {
		return fileError("read_file", p, err)
	}
	if fi.Size > maxReadableFile {
		return toolError("read_file %s: the file is %d bytes, too large to read (limit %d); use shell with head or grep", p, fi.Size, maxReadableFile), nil
	}
	b, err := sb.Read(ctx, p)
	if err != nil {
		return fileError("read_file", p, err)
	}
	res := api.RunToolResult{Path: p, Stamp: stampOf(fi)}
	if !utf8.Valid(b) {
		res.Content = fmt.Sprintf("%s is a binary file (%d bytes); its content is not shown", p, len(b))
		return res, nil
	}
	if len(b) > ReadCap {
		cut := headUTF8(b, ReadCap)
		res.Content = string(cut) + fmt.Sprintf("\n[truncated: showing %d of %d bytes]", len(cut), len(b))
		return res, nil
	}
	res.Content = string(b)
	return res, nil
}

// writeFile enforces read-before-write: an existing file may be replaced only if the agent
// read it and it has not changed since (size and modification time), so an agent never
// clobbers what it has not seen.
func (a *Tools) writeFile(ctx context.Context, sb sandbox.Sandbox, p, content string, seen *api.FileStamp) (api.RunToolResult, error) {
	fi, err := sb.Stat(ctx, p)
	switch {
	case err == nil:
		if seen == nil {
			return toolError("write_file %s: the file exists and you have not read it; read it with read_file first", p), nil
		}
		if cur := stampOf(fi); *cur != *seen {
			return toolError("write_file %s: the file changed since you read it (stale); read it again first", p), nil
		}
	case errors.Is(err, sandbox.ErrNotFound):
	default:
		return fileError("write_file", p, err)
	}
	written, err := sb.Write(ctx, p, []byte(content))
	if err != nil {
		return fileError("write_file", p, err)
	}
	res := api.RunToolResult{Content: fmt.Sprintf("wrote %d bytes to %s", len(content), written), Path: written}
	if fi, err := sb.Stat(ctx, p); err == nil {
		res.Stamp = stampOf(fi)
	}
	return res, nil
}

// preListing is a workspace listing taken in a shell command's own round trip
// (sandbox.ShellLister), for the snapshot after it.
type preListing struct {
	// at is before the command was sent, so no later than the listing began: the
	// snapshot's racy window counts from it (snapshot.go).
	at      time.Time
	entries []sandbox.WorkspaceEntry
}

// shell runs cmd in sb. With list, a sandbox that can list its workspace in the same
// round trip (sandbox.ShellLister) does, and the listing comes back (nil otherwise).
func (a *Tools) shell(ctx context.Context, sb sandbox.Sandbox, cmd string, timeout time.Duration, list bool) (api.RunToolResult, *preListing, error) {
	var (
		out    sandbox.ShellResult
		err    error
		listed *preListing
	)
	if sl, ok := sb.(sandbox.ShellLister); ok && list {
		at := time.Now()
		var entries []sandbox.WorkspaceEntry
		out, entries, err = sl.ShellAndList(ctx, cmd, timeout)
		if entries != nil {
			listed = &preListing{at: at, entries: entries}
		}
	} else {
		out, err = sb.Shell(ctx, cmd, timeout)
	}
	if err != nil && (!out.TimedOut || ctx.Err() != nil) { // a cancelled activity is not a timed-out command
		if ctx.Err() != nil {
			return api.RunToolResult{}, nil, fmt.Errorf("shell: %w", ctx.Err())
		}
		res, err := fileError("shell", "", err)
		return res, nil, err
	}
	var b strings.Builder
	if out.TimedOut {
		fmt.Fprintf(&b, "killed after %v (timeout)\n", timeout)
	} else {
		fmt.Fprintf(&b, "exit code %d\n", out.ExitCode)
	}
	if s := sandbox.TruncateOutput(out.Stdout, ShellLines, ShellChars); s != "" {
		fmt.Fprintf(&b, "--- stdout ---\n%s\n", strings.TrimRight(s, "\n"))
	}
	if s := sandbox.TruncateOutput(out.Stderr, ShellLines, ShellChars); s != "" {
		fmt.Fprintf(&b, "--- stderr ---\n%s\n", strings.TrimRight(s, "\n"))
	}
	return api.RunToolResult{Content: strings.TrimRight(b.String(), "\n"), IsError: out.TimedOut || out.ExitCode != 0}, listed, nil
}

// CollectOutputs returns the sandbox files matching an agent's `produces` patterns: a
// pattern with * ? [ is globbed, a plain path is included when it exists. In a user's own
// directory only the files the run changed count (dirruns.go).
func (a *Tools) CollectOutputs(ctx context.Context, req api.CollectOutputsRequest) ([]string, error) {
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return nil, classify(fmt.Errorf("collect outputs: %w", err))
	}
	var out []string
	for _, p := range req.Patterns {
		p = path.Clean(strings.TrimPrefix(p, "./"))
		if strings.ContainsAny(p, "*?[{") {
			files, err := sb.Glob(ctx, p)
			if err != nil {
				continue
			}
			out = append(out, files...)
		} else if _, err := sb.Stat(ctx, p); err == nil {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// A user's directory holds earlier runs' files too: only what this run changed is its
	// output (dirruns.go).
	if l, ok := sb.(interface{ RealDir() string }); ok && isUserDir(req.Sandbox) {
		if since, marked := a.sandboxes.dirRunSince(req.RunID); marked {
			out = changedSince(l.RealDir(), out, since)
		}
	}
	return out, nil
}

// RestoreArtifacts writes recorded artifacts back into the run's sandbox (into/<name>).
func (a *Tools) RestoreArtifacts(ctx context.Context, req api.RestoreArtifactsRequest) ([]string, error) {
	sb, err := a.sandboxes.Open(ctx, req.RunID, req.Sandbox)
	if err != nil {
		return nil, classify(fmt.Errorf("restore artifacts: %w", err))
	}
	from := req.FromRun
	if from == "" {
		from = req.RunID
	}
	var written []string
	for _, name := range req.Names {
		b, err := a.store.Get(ctx, from, name)
		if err != nil {
			return written, classify(fmt.Errorf("restore artifact %s: %w", name, err))
		}
		p, err := sb.Write(ctx, path.Join(orDot(req.Into), name), b)
		if err != nil {
			return written, classify(fmt.Errorf("restore artifact %s: %w", name, err))
		}
		written = append(written, p)
	}
	return written, nil
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}
