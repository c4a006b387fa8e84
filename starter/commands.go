package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/runs"
)

func needArgs(args []string, n int, what string) error {
	if len(args) != n {
		return usagef("want %s, got %d argument(s)", what, len(args))
	}
	return nil
}

// maxInputBytes bounds --input: the largest body the HTTP API can be set to take
// (gateway.max_body_bytes). Reading stops there, so `@/dev/zero` is an error, not a
// starter that eats its memory.
const maxInputBytes = config.MaxBodyBytes

// readInput returns JSON given inline, as @file, or as @- (standard input).
func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	if strings.HasPrefix(s, "@") {
		var err error
		if s == "@-" {
			b, err = readBounded(os.Stdin, s)
		} else {
			var f *os.File
			if f, err = os.Open(s[1:]); err == nil {
				b, err = readBounded(f, s)
				f.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("read --input %s: %w", s, err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("--input is not valid JSON: %.80s", strings.TrimSpace(string(b)))
	}
	return b, nil
}

// inputMistake makes a field of --input the workflow does not take a usage error (exit 2,
// the usage line), as invalid JSON in --input is; any other error is returned as it is.
func inputMistake(err error) error {
	var uf *runs.UnknownFieldError
	if errors.As(err, &uf) {
		return usagef("%v", uf)
	}
	return err
}

// readBounded reads r to its end, or fails once it passes maxInputBytes.
func readBounded(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInputBytes {
		return nil, usagef("--input %s is larger than %d MiB; pass a reference to the data (a path, a URL) instead", name, maxInputBytes>>20)
	}
	return b, nil
}

func inputObject(s string) (map[string]any, error) {
	raw, err := readInput(s)
	if err != nil || raw == nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, usagef("--input must be a JSON object: %v", err)
	}
	return m, nil
}

func runCmd() *command {
	return &command{
		name: "run", args: "<workflow>", summary: "Start a run of a workflow and print its id.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("input", "", "payload as JSON, @file, or @- for standard input")
			fs.String("id", "", "run id (default: a new UUIDv7)")
			fs.Duration("start-delay", 0, "start the run after this long (e.g. 10m); it is queued until then")
			fs.Bool("wait", false, "follow the run until it is done, failed or suspended")
			fs.Bool("json", false, "print the run record as JSON when waiting, else {\"id\": ...}")
			fs.Bool("no-check", false, "start without asking the workers' registry whether the workflow type and the input's fields are known (when it cannot answer)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a workflow name"); err != nil {
				return err
			}
			in, _ := fs.GetString("input")
			payload, err := readInput(in)
			if err != nil {
				return err
			}
			delay, _ := fs.GetDuration("start-delay")
			unchecked, _ := fs.GetBool("no-check")
			return startRun(ctx, e, fs, runs.StartRequest{Workflow: args[0], Payload: payload, StartDelay: delay, Unchecked: unchecked}, args[0])
		},
	}
}

// startRun starts req with --id, then prints the new run's id ({"id": ...} with --json),
// or with --wait follows it like `logs --follow` after saying on stderr which run started
// (what names it, e.g. "DocumentApproval" or "agent scribe").
func startRun(ctx context.Context, e *env, fs *pflag.FlagSet, req runs.StartRequest, what string) error {
	req.ID, _ = fs.GetString("id")
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	id, err := rc.Start(ctx, req)
	if err != nil {
		return inputMistake(err)
	}
	asJSON, _ := fs.GetBool("json")
	if wait, _ := fs.GetBool("wait"); wait {
		// stdout gets the id as without --wait (the record with --json), so
		// ID=$(starter run ... --wait) captures the id; the rest goes to stderr.
		if !asJSON {
			fmt.Fprintln(e.stdout, id)
		}
		fmt.Fprintf(e.stderr, "started %s run %s\n", what, id)
		return waitRun(ctx, e, rc, id, 0, asJSON, false)
	}
	if asJSON {
		return e.printJSON(map[string]string{"id": id})
	}
	fmt.Fprintln(e.stdout, id)
	return nil
}

// waitRun follows a run, printing each new event to stderr, until it closes or suspends
// again after event afterSeq; then prints the outcome and what to do next, to stderr too,
// so stdout holds one answer a script can capture: a command that starts a run has
// printed its id (run, agent, rerun, fork), and one that decides or resumes a run
// (result true) prints the run's result there when it ended done, nothing otherwise.
// With asJSON the final record goes to stdout instead.
func waitRun(ctx context.Context, e *env, rc *runs.Client, id string, afterSeq int64, asJSON, result bool) error {
	last := afterSeq
	var retries retryLines
	rec, err := rc.Follow(ctx, id, func(rec api.Record) bool {
		retries.print(e.stderr, rec)
		suspendedAgain := false
		for _, ev := range rec.Events {
			if ev.Seq <= last {
				continue
			}
			last = ev.Seq
			fmt.Fprintf(e.stderr, "  %s\n", eventLine(ev))
			if ev.Type == "suspended" || ev.Type == "approval_requested" || ev.Type == api.EventBudgetExceeded {
				suspendedAgain = true
			}
		}
		return rec.Status == api.StatusSuspended && (suspendedAgain || afterSeq == 0 && last > 0)
	})
	if err != nil {
		return err
	}
	if asJSON {
		if err := e.printJSON(rec); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stderr, "run %s is %s\n", id, statusDetail(rec))
		switch {
		case rec.Status == api.StatusDone && result:
			fmt.Fprintf(e.stdout, "%s\n", rec.Result)
		case rec.Status == api.StatusDone:
			fmt.Fprintf(e.stderr, "result: %s\n", rec.Result)
		}
		if next := nextSteps(rec); next != "" {
			fmt.Fprintln(e.stderr, next)
		}
	}
	if rec.Status == api.StatusFailed {
		return fmt.Errorf("run %s failed: %s", id, deref(rec.Error))
	}
	return nil
}

// retryLines prints, once per attempt, what a followed run's retried activities wait on
// ("model call retrying (attempt 5, next in 16 s): connection refused"): a retry writes
// nothing to the run's events, and a run that only waits for its model endpoint to come
// back must not look like one that hangs.
type retryLines struct {
	printed map[string]int32 // activity id → the attempt last printed
}

func (r *retryLines) print(w io.Writer, rec api.Record) {
	now := time.Now()
	for _, p := range rec.Retrying {
		if r.printed[p.ActivityID] == p.Attempt {
			continue
		}
		if r.printed == nil {
			r.printed = map[string]int32{}
		}
		r.printed[p.ActivityID] = p.Attempt
		fmt.Fprintf(w, "  %s\n", runs.RetryLine(p, now))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func statusDetail(rec api.Record) string {
	switch {
	case rec.Status == api.StatusSuspended:
		if a, ok := rec.Approval(); ok && a.Capability != api.CapabilityBudget {
			return fmt.Sprintf("suspended: approval of %s (call %s)", a.Tool, a.CallID)
		}
		if si, ok := rec.Suspend(); ok {
			s := "suspended: " + si.Reason
			if si.ResumeAt != nil {
				s += ", resumes at " + si.ResumeAt.Format(time.RFC3339)
			}
			return s
		}
	case rec.Error != nil:
		return fmt.Sprintf("%s: %s", rec.Status, *rec.Error)
	}
	return string(rec.Status)
}

func nextSteps(rec api.Record) string {
	switch rec.Status {
	case api.StatusSuspended:
		if a, ok := rec.Approval(); ok && a.Capability == api.CapabilityBudget {
			return fmt.Sprintf("next: starter approve %s --budget +N (tokens) or --budget +$X (USD)   or   starter deny %s --reason \"...\"", rec.ID, rec.ID)
		}
		if a, ok := rec.Approval(); ok {
			return fmt.Sprintf("next: starter approve %s --call %s   or   starter deny %s --call %s --reason \"...\"   or   starter answer %s --call %s --result \"...\"",
				rec.ID, a.CallID, rec.ID, a.CallID, rec.ID, a.CallID)
		}
		if si, ok := rec.Suspend(); ok && si.ResumeKey != "" {
			return fmt.Sprintf("next: starter approve %s   or   starter resume %s --key %s --input '{...}'", rec.ID, rec.ID, si.ResumeKey)
		}
		return fmt.Sprintf("next: starter approve %s   or   starter deny %s --reason \"...\"   or   starter resume %s --input '{...}'", rec.ID, rec.ID, rec.ID)
	case api.StatusFailed, api.StatusInterrupted, api.StatusCanceled:
		return fmt.Sprintf("next: starter logs %s   or   starter rerun %s [--input '{...}']", rec.ID, rec.ID)
	}
	return ""
}

func eventLine(ev api.Event) string {
	data := string(ev.Data)
	if data == "null" {
		data = ""
	}
	return fmt.Sprintf("#%-3d %s  %-16s %s", ev.Seq, ev.At.Format("15:04:05.000"), ev.Type, data)
}

func showCmd() *command {
	return &command{
		name: "show", args: "<run-id>", summary: "Show a run's record: status, payload, result, state, events, artifacts.",
		flags: func(fs *pflag.FlagSet) { fs.Bool("json", false, "print the run record as JSON") },
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			rec, err := e.record(ctx, args[0])
			if err != nil {
				return err
			}
			if rec.Warning != "" {
				fmt.Fprintln(e.stderr, "warning:", rec.Warning)
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(rec)
			}
			printRecord(e.stdout, rec)
			return nil
		},
	}
}

func printRecord(w io.Writer, rec api.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Run", rec.ID)
	row("Workflow", rec.Workflow)
	row("Status", statusDetail(rec))
	for _, p := range rec.Retrying {
		row("Retrying", runs.RetryLine(p, time.Now()))
	}
	row("Created", rec.CreatedAt.Format(time.RFC3339))
	row("Updated", rec.UpdatedAt.Format(time.RFC3339))
	row("Payload", string(rec.Payload))
	if rec.Result != nil {
		row("Result", string(rec.Result))
	}
	if rec.Error != nil {
		row("Error", *rec.Error)
	}
	printRunUsage(row, rec.Usage)
	if a, ok := rec.Approval(); ok && a.Capability == api.CapabilityBudget {
		text, readable := budgetPauseText(a)
		if !readable {
			text = string(a.Args)
		}
		row("Pending", fmt.Sprintf("budget pause %s: %s", a.CallID, text))
	} else if ok {
		row("Pending", fmt.Sprintf("tool call %s: %s (%s)", a.CallID, a.Tool, a.Capability))
		if len(a.Args) > 0 && string(a.Args) != "null" {
			row("  args", string(a.Args))
		}
		if a.ArgsSHA256 != "" {
			row("  args_sha256", a.ArgsSHA256)
		}
		if x := expiryCell(a.ExpiresAt, a.OnTimeout, a.Escalated); x != "" {
			row("  expires", x)
		}
	}
	printDelegation(row, rec)
	var keys []string
	for _, k := range sortedKeys(rec.State) {
		if !api.IsReservedStateKey(k) && !(k == api.StateParent && rec.Workflow == api.WorkflowAgentRun) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		row("Checkpoints", strings.Join(keys, ", "))
	}
	row("Events", fmt.Sprintf("%d (starter logs %s)", len(rec.Events), rec.ID))
	for _, a := range rec.Artifacts {
		row("Artifact", fmt.Sprintf("%s (%d bytes)", a.Name, a.Size))
	}
	tw.Flush()
	if next := nextSteps(rec); next != "" {
		fmt.Fprintln(w, next)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func listCmd() *command {
	return &command{
		name: "list", args: "", summary: "List runs, newest first (through Temporal's visibility API).",
		flags: func(fs *pflag.FlagSet) {
			fs.String("status", "", "only runs with this status: "+joinStatuses())
			fs.String("workflow", "", "only runs of this workflow")
			fs.Int("limit", 50, fmt.Sprintf("at most this many runs (1-%d)", runs.MaxListLimit))
			fs.Bool("json", false, "print JSON")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			var req runs.ListRequest
			if s, _ := fs.GetString("status"); s != "" {
				st, err := api.ParseStatus(s)
				if err != nil {
					return usagef("--status: %v", err)
				}
				req.Status = st
			}
			req.Workflow, _ = fs.GetString("workflow")
			req.Limit, _ = fs.GetInt("limit")
			if req.Limit < 1 || req.Limit > runs.MaxListLimit {
				return usagef("--limit %d: want 1 to %d", req.Limit, runs.MaxListLimit)
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			rows, _, err := rc.List(ctx, req)
			if err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(rows)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tWORKFLOW\tSTATUS\tSTARTED")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Status, r.CreatedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}

func joinStatuses() string {
	var s []string
	for _, st := range api.Statuses {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

func logsCmd() *command {
	return &command{
		name: "logs", args: "<run-id>", summary: "Print a run's events in order, one per line.",
		flags: func(fs *pflag.FlagSet) {
			fs.BoolP("follow", "f", false, "keep printing new events until the run closes")
			fs.Bool("json", false, "print one JSON event per line")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			asJSON, _ := fs.GetBool("json")
			var last int64
			warned := false
			var retries retryLines
			print := func(rec api.Record) {
				retries.print(e.stderr, rec) // not an event: stdout stays one event a line
				if rec.Warning != "" && !warned {
					warned = true
					fmt.Fprintln(e.stderr, "warning:", rec.Warning)
				}
				for _, ev := range rec.Events {
					if ev.Seq <= last {
						continue
					}
					last = ev.Seq
					if asJSON {
						b, _ := json.Marshal(ev)
						fmt.Fprintln(e.stdout, string(b))
					} else {
						fmt.Fprintln(e.stdout, eventLine(ev))
					}
				}
			}
			if follow, _ := fs.GetBool("follow"); follow {
				_, err := rc.Follow(ctx, args[0], func(rec api.Record) bool { print(rec); return false })
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			rec, err := rc.Get(ctx, args[0])
			if err != nil {
				return err
			}
			print(rec)
			return nil
		},
	}
}

func resumeCmd() *command {
	return &command{
		name: "resume", args: "<run-id>", summary: "Resume a run suspended by the workflow, with input.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("input", "", "resume input as a JSON object, @file or @-")
			fs.String("key", "", "the resume key the run suspended with, if any")
			fs.String("at", "", "resume at this time (RFC 3339, e.g. 2026-12-01T09:00:00Z) with a durable timer")
			fs.Duration("in", 0, "resume after this long (e.g. 2h) with a durable timer")
			fs.Bool("wait", false, "follow the run until it is done, failed or suspended again")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			in, _ := fs.GetString("input")
			input, err := inputObject(in)
			if err != nil {
				return err
			}
			req := runs.ResumeRequest{Input: input}
			req.Key, _ = fs.GetString("key")
			atS, _ := fs.GetString("at")
			inD, _ := fs.GetDuration("in")
			switch {
			case atS != "" && inD != 0:
				return usagef("give --at or --in, not both")
			case atS != "":
				at, err := time.Parse(time.RFC3339, atS)
				if err != nil {
					return usagef("--at %q: want RFC 3339 such as 2026-12-01T09:00:00Z", atS)
				}
				req.At = at
			case inD < 0:
				return usagef("--in %v is negative", inD)
			case inD > 0:
				req.At = time.Now().Add(inD)
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			wait, _ := fs.GetBool("wait")
			var before api.Record // where --wait starts following; read before resuming
			if wait && req.At.IsZero() {
				if before, err = rc.Get(ctx, args[0]); err != nil {
					return err
				}
			}
			if err := rc.Resume(ctx, args[0], req); err != nil {
				return err
			}
			if !req.At.IsZero() {
				fmt.Fprintf(e.stdout, "run %s resumes at %s\n", args[0], req.At.UTC().Format(time.RFC3339))
				return nil
			}
			if wait {
				// stdout gets the run's result, once it is done (waitRun).
				fmt.Fprintf(e.stderr, "resumed run %s\n", args[0])
				return waitRun(ctx, e, rc, args[0], lastSeq(before), false, true)
			}
			fmt.Fprintf(e.stdout, "resumed run %s\n", args[0])
			return nil
		},
	}
}

func lastSeq(rec api.Record) int64 {
	if n := len(rec.Events); n > 0 {
		return rec.Events[n-1].Seq
	}
	return 0
}

func decideFlags(action string) func(fs *pflag.FlagSet) {
	return func(fs *pflag.FlagSet) {
		fs.String("call", "", "the pending tool call id (default: whatever is pending)")
		switch action {
		case api.DecideDeny:
			fs.String("reason", "", "why (required; the workflow or the model sees it)")
		case api.DecideAnswer:
			fs.String("result", "", "the text the model gets instead of the tool's result (required)")
			fs.String("reason", "", "why (recorded)")
		default:
			fs.String("reason", "", "why (recorded)")
			fs.String("args", "", "run the tool call with these edited arguments (a JSON object) instead of the model's")
			fs.Bool("always", false, "approve this tool for the rest of the run")
			fs.String("budget", "", "approve a budget pause by raising the bound it reached: +N tokens (+50000, +50k) or +$X USD (+$2.50)")
		}
		fs.String("by", osUser(user.Current, os.Getenv), "who decides (recorded; default: the OS user)")
		fs.Bool("wait", false, "follow the run until it is done, failed or suspended again")
	}
}

// osUser is who a decision records when --by is not given: the OS user's name, else
// $USER, else "" (then the run records no author, as before --by had a default).
func osUser(current func() (*user.User, error), getenv func(string) string) string {
	if u, err := current(); err == nil && u.Username != "" {
		return u.Username
	}
	return getenv("USER")
}

func decide(action string) func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
	return func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
		if err := needArgs(args, 1, "a run id"); err != nil {
			return err
		}
		d := runs.Decision{Approved: action == api.DecideApprove, Action: action}
		d.CallID, _ = fs.GetString("call")
		d.Reason, _ = fs.GetString("reason")
		d.By, _ = fs.GetString("by")
		switch action {
		case api.DecideApprove:
			d.Always, _ = fs.GetBool("always")
			if edited, _ := fs.GetString("args"); fs.Changed("args") {
				var obj map[string]any
				if err := json.Unmarshal([]byte(edited), &obj); err != nil || obj == nil {
					return usagef("--args must be a JSON object (the call's edited arguments): %.80s", edited)
				}
				if d.Always {
					return usagef("--always does not go with --args: it would approve later calls of the tool that nobody edited")
				}
				d.Args = json.RawMessage(edited)
			}
			if v, _ := fs.GetString("budget"); fs.Changed("budget") {
				r, err := parseRaise(v)
				if err != nil {
					return usagef("--budget: %v", err)
				}
				d.Budget = r
			}
		case api.DecideDeny:
			if strings.TrimSpace(d.Reason) == "" {
				return usagef("deny needs --reason")
			}
		case api.DecideAnswer:
			if d.Result, _ = fs.GetString("result"); strings.TrimSpace(d.Result) == "" {
				return usagef("answer needs --result: the text the model gets instead of the tool's result")
			}
		}
		rc, err := e.runs(ctx)
		if err != nil {
			return err
		}
		what, before, err := rc.Decide(ctx, args[0], d)
		if err != nil {
			return err
		}
		wait, _ := fs.GetBool("wait")
		if !wait {
			fmt.Fprintln(e.stdout, what)
			return nil
		}
		// With --wait stdout gets the answer only (the run's result, a session turn's
		// reply), so RESULT=$(starter approve <run> --wait) captures it; the rest is stderr.
		fmt.Fprintln(e.stderr, what)
		if agent, inst, ok := api.ParseSessionID(before.ID); ok {
			a, _ := before.Approval()
			return waitTurn(ctx, e, rc, agent, inst, a.CallID, lastSeq(before))
		}
		return waitRun(ctx, e, rc, args[0], lastSeq(before), false, true)
	}
}

func approveCmd() *command {
	return &command{name: "approve", args: "<run-id> [--call ID] [--args JSON] [--always] [--budget +N|+$X]",
		summary: "Approve what a suspended run waits for: a pending tool call (as is, or with edited --args), a budget pause (with a --budget raise), or the workflow's own pause.",
		flags:   decideFlags(api.DecideApprove), run: decide(api.DecideApprove)}
}

func denyCmd() *command {
	return &command{name: "deny", args: "<run-id> --reason TEXT",
		summary: "Deny what a suspended run waits for, with a reason.",
		flags:   decideFlags(api.DecideDeny), run: decide(api.DecideDeny)}
}

func answerCmd() *command {
	return &command{name: "answer", args: "<run-id> [--call ID] --result TEXT",
		summary: "Answer a pending tool call yourself: the tool does not run, the model gets your text as its result.",
		flags:   decideFlags(api.DecideAnswer), run: decide(api.DecideAnswer)}
}

func artifactsCmd() *command {
	return &command{
		name: "artifacts", args: "<run-id>", summary: "List a run's artifacts.",
		flags: func(fs *pflag.FlagSet) { fs.Bool("json", false, "print JSON") },
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			rec, err := e.record(ctx, args[0])
			if err != nil {
				return err
			}
			if rec.Warning != "" {
				fmt.Fprintln(e.stderr, "warning:", rec.Warning)
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				return e.printJSON(rec.Artifacts)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tSHA256\tAT")
			for _, a := range rec.Artifacts {
				fmt.Fprintf(tw, "%s\t%d\t%.12s\t%s\n", a.Name, a.Size, a.SHA256, a.At.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}

func artifactCmd() *command {
	return &command{
		name: "artifact", args: "<run-id> <name>", summary: "Write one artifact's bytes to standard output or a file.",
		flags: func(fs *pflag.FlagSet) {
			fs.StringP("output", "o", "", "write to this file instead of standard output")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 2, "a run id and an artifact name"); err != nil {
				return err
			}
			rec, err := e.record(ctx, args[0])
			if err != nil {
				return err
			}
			a, ok := rec.FindArtifact(args[1])
			if !ok {
				var names []string
				for _, a := range rec.Artifacts {
					names = append(names, a.Name)
				}
				return fmt.Errorf("run %s has no artifact %q (it has: %s)", args[0], args[1], strings.Join(names, ", "))
			}
			body, err := artifactBody(ctx, e, rec.ID, a)
			if err != nil {
				return err
			}
			if out, _ := fs.GetString("output"); out != "" {
				if err := os.WriteFile(out, body, 0o644); err != nil {
					return fmt.Errorf("write artifact %s to %s: %w", a.Name, out, err)
				}
				fmt.Fprintf(e.stderr, "wrote %s (%d bytes) to %s\n", a.Name, len(body), out)
				return nil
			}
			_, err = e.stdout.Write(body)
			return err
		},
	}
}

// artifactBody returns the bytes: inline content when the record has it, else from the
// artifact store the worker wrote (artifacts.url), checked against the recorded sha256.
func artifactBody(ctx context.Context, e *env, runID string, a api.Artifact) ([]byte, error) {
	var st artifacts.Getter
	if a.Content == nil {
		var err error
		if st, err = e.artifactStore(ctx); err != nil {
			return nil, err
		}
	}
	body, err := artifacts.Read(ctx, st, runID, a)
	return body, storeHint(err)
}

// storeHint adds where the starter looked to an artifact that is not in the store.
func storeHint(err error) error {
	if errors.Is(err, artifacts.ErrNotFound) {
		return fmt.Errorf("%w (the starter reads the store the worker wrote: check artifacts.url)", err)
	}
	return err
}

func cancelCmd() *command {
	return &command{
		name: "cancel", args: "<run-id> [--terminate]", summary: "Cancel an open run (--terminate: end it at once, for a run whose workflow cannot run).",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("terminate", false, "end the run at once without running its cleanup (a run whose workflow task cannot load its input)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			cancel := rc.Cancel
			if terminate, _ := fs.GetBool("terminate"); terminate {
				cancel = func(ctx context.Context, id string) (string, error) {
					return rc.Terminate(ctx, id, "starter cancel --terminate by "+osUser(user.Current, os.Getenv))
				}
			}
			what, err := cancel(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, what)
			return nil
		},
	}
}

func rerunCmd() *command {
	return &command{
		name: "rerun", args: "<run-id>",
		summary: "Start a failed run again as a new run; completed checkpoints carry over, only missing steps run.",
		flags: func(fs *pflag.FlagSet) {
			fs.String("input", "", "replace the failed run's payload: JSON, @file, or @- for standard input")
			fs.Bool("wait", false, "follow the new run until it is done, failed or suspended")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 1, "a run id"); err != nil {
				return err
			}
			in, _ := fs.GetString("input")
			payload, err := readInput(in)
			if err != nil {
				return err
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			id, err := rc.Rerun(ctx, args[0], payload)
			if err != nil {
				return inputMistake(err)
			}
			fmt.Fprintln(e.stdout, id)
			if wait, _ := fs.GetBool("wait"); wait {
				return waitRun(ctx, e, rc, id, 0, false, false)
			}
			return nil
		},
	}
}
