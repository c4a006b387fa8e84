// Package replay is the deploy gate: it replays the histories of runs against the workflow
// code compiled into this binary and reports, per run, whether that code still produces the
// commands the run recorded. A run waiting days for an approval is replayed by whichever
// worker picks it up next; if the new code schedules a different command at any point of
// the history, that run is stuck on a failing workflow task. Check finds this before the
// deploy, on the server's open runs; Files on recorded histories (workflows/testdata), in CI.
//
// The workflows come from a register function (workflows.RegisterAll, or a custom worker's
// own), so a binary checks exactly what it would run. The replayer has the workers' External
// Storage: an offloaded payload in a history is only a reference, read back from the blob
// store as a worker would.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/workflows"
)

// DefaultLimit is how many runs Check replays when Options.Limit is 0.
const DefaultLimit = 1000

// Options select the runs Check replays and how histories are read.
type Options struct {
	// Query is a visibility query; empty means the open runs (ExecutionStatus="Running")
	// of TaskQueue, or with Closed the open and the most recent closed ones.
	Query string
	// Limit caps the runs replayed (DefaultLimit when 0); newest first.
	Limit int
	// Closed adds recently closed runs to the default query.
	Closed bool
	// TaskQueue narrows the default query to the runs of one task queue ("" for every
	// run of the client's namespace).
	TaskQueue string
	// Storage is the workers' External Storage (payloads.ExternalStorage over
	// artifacts.url), so offloaded payloads replay. Unset (no Drivers) in Files means the blobs/
	// directory beside the history files, if there is one.
	Storage converter.ExternalStorage
}

// Option sets a field of Options for RunCommand.
type Option func(*Options)

// WithStorage gives RunCommand the workers' External Storage.
func WithStorage(s converter.ExternalStorage) Option { return func(o *Options) { o.Storage = s } }

// WithTaskQueue narrows RunCommand's default query to the runs of task queue q.
func WithTaskQueue(q string) Option { return func(o *Options) { o.TaskQueue = q } }

// Result is the outcome of replaying one run's history.
type Result struct {
	WorkflowID   string `json:"workflow_id"`
	RunID        string `json:"run_id"`
	WorkflowType string `json:"workflow_type"`
	// File is the history file replayed (Files only).
	File string `json:"file,omitempty"`
	OK   bool   `json:"ok"`
	// Error is the first divergence (or why the history could not be replayed).
	Error string `json:"error,omitempty"`
	// Unreadable: the file is no history that can be checked (not a regular file, too
	// large, not JSON, incomplete), so nothing was replayed; Error says why.
	Unreadable bool `json:"unreadable,omitempty"`
	// NotThisBinary: the run's workflow type is none this binary registers (a custom
	// worker's own workflow, met by the starter's check-replay), so nothing was replayed
	// and it is no divergence: Error says which binary can check it.
	NotThisBinary bool `json:"not_this_binary,omitempty"`
}

// NotThisBinaryHint is the Error of a NotThisBinary result.
const NotThisBinaryHint = "not a workflow of this binary: run your worker's own check-replay (bin/<your worker> check-replay)"

// String is the line RunCommand prints: `ok <id> <run> <type>` or
// `FAIL <id> <run> <type>: <first divergence>`, with the file in parentheses for Files.
func (r Result) String() string {
	if r.Unreadable {
		return "FAIL " + r.File + ": " + r.Error
	}
	s := fmt.Sprintf("%s %s %s", r.WorkflowID, r.RunID, r.WorkflowType)
	if r.File != "" {
		s += " (" + r.File + ")"
	}
	switch {
	case r.OK:
		return "ok " + s
	case r.NotThisBinary:
		return "skip " + s + ": " + r.Error
	}
	return "FAIL " + s + ": " + r.Error
}

var (
	// ErrDiverged is returned (wrapped) by RunCommand when a run does not replay.
	ErrDiverged = errors.New("do not replay against this binary's workflows")
	// ErrStoreCorrupt is returned (wrapped) by RunCommand when runs do not replay only
	// because a blob their history needs no longer matches its sha256.
	ErrStoreCorrupt = errors.New("cannot be replayed: " + api.StoreCorruptLead + " a blob their history needs do not match their sha256 (the store changed, not the workflows)")
	// ErrUnreadable is returned (wrapped) by RunCommand when history files could not be
	// checked at all: they say nothing of the workflows either way.
	ErrUnreadable = errors.New("are no history that can be checked")
	// ErrNoClient is returned when runs are to be fetched from a server but there is no client.
	ErrNoClient = errors.New("no Temporal client to fetch histories with")
)

// query is the visibility query opts select.
func (o Options) query() string {
	if o.Query != "" {
		return o.Query
	}
	var parts []string
	if !o.Closed {
		parts = append(parts, `ExecutionStatus="Running"`)
	}
	if o.TaskQueue != "" {
		parts = append(parts, fmt.Sprintf("TaskQueue=%q", o.TaskQueue))
	}
	return strings.Join(parts, " AND ")
}

func (o Options) limit() int {
	if o.Limit > 0 {
		return o.Limit
	}
	return DefaultLimit
}

// Check replays the histories of the runs opts select (from c's namespace, newest first)
// against the workflows register registers. One Result per run; the error is for a failed
// listing, never for a run that does not replay (that is a Result with OK false).
func Check(ctx context.Context, c client.Client, register func(workflows.Registry), opts Options) ([]Result, error) {
	res, _, err := check(ctx, c, register, opts)
	return res, err
}

func check(ctx context.Context, c client.Client, register func(workflows.Registry), opts Options) ([]Result, bool, error) {
	if c == nil {
		return nil, false, ErrNoClient
	}
	q := opts.query()
	types := registeredTypes(register)
	var out []Result
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: int32(min(opts.limit(), 1000))})
		if err != nil {
			return out, false, fmt.Errorf("list runs matching %q: %w", q, err)
		}
		for _, info := range resp.GetExecutions() {
			if len(out) == opts.limit() {
				return out, true, nil
			}
			r := Result{WorkflowID: info.GetExecution().GetWorkflowId(), RunID: info.GetExecution().GetRunId(), WorkflowType: info.GetType().GetName()}
			if types.foreign(r.WorkflowType) {
				out = append(out, r.notThisBinary())
				continue
			}
			h, err := history(ctx, c, r.WorkflowID, r.RunID)
			if err != nil {
				if ctx.Err() != nil {
					return out, false, ctx.Err()
				}
				r.Error = err.Error()
			} else {
				r.Error = replayOne(register, opts.Storage, h, r.WorkflowID, r.RunID)
			}
			r.OK = r.Error == ""
			out = append(out, r.classify())
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, false, nil
		}
	}
}

// history is the whole history of one run, as the server holds it (offloaded payloads
// stay references; the replayer's External Storage reads them).
func history(ctx context.Context, c client.Client, id, runID string) (*historypb.History, error) {
	var h historypb.History
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read history of %s (run %s): %w", id, runID, err)
		}
		h.Events = append(h.Events, ev)
	}
	return &h, nil
}

// Files replays recorded JSON histories (as `temporal workflow show --output json` and the
// e2e recorder write them). A path is a file or a directory, whose *.json files are all
// replayed in name order. Without opts.Storage, offloaded payloads are read from the
// blobs/ directory beside the files (each blob named by its sha256), as committed under
// workflows/testdata. A file that cannot be read or parsed is a failed Result.
func Files(paths []string, register func(workflows.Registry), opts Options) ([]Result, error) {
	var files, blobDirs []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("replay histories %s: %w", p, err)
		}
		if !st.IsDir() && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("replay histories %s: not a regular file or a directory (%s)", p, fileKind(st.Mode()))
		}
		dir := filepath.Dir(p)
		if st.IsDir() {
			dir = p
			matches, err := filepath.Glob(filepath.Join(p, "*.json"))
			if err != nil {
				return nil, err
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("replay histories: directory %s holds no *.json history", p)
			}
			sort.Strings(matches)
			files = append(files, matches...)
		} else {
			files = append(files, p)
		}
		blobDirs = append(blobDirs, filepath.Join(dir, "blobs"))
	}
	storage := opts.Storage
	if len(storage.Drivers) == 0 {
		blobs, err := loadBlobs(blobDirs)
		if err != nil {
			return nil, err
		}
		if blobs != nil {
			defer blobs.Close()
			storage = payloads.ExternalStorage(blobs, 0)
		}
	}
	types := registeredTypes(register)
	out := make([]Result, 0, len(files))
	for _, f := range files {
		r := Result{File: f}
		h, err := readHistory(f)
		if err != nil {
			r.Error, r.Unreadable = err.Error(), true
			out = append(out, r)
			continue
		}
		attr := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
		r.WorkflowID, r.RunID, r.WorkflowType = attr.GetWorkflowId(), attr.GetOriginalExecutionRunId(), attr.GetWorkflowType().GetName()
		if r.WorkflowID == "" {
			r.WorkflowID = "-"
		}
		if r.RunID == "" {
			r.RunID = "-"
		}
		if types.foreign(r.WorkflowType) {
			out = append(out, r.notThisBinary())
			continue
		}
		r.Error = replayOne(register, storage, h, attr.GetWorkflowId(), attr.GetOriginalExecutionRunId())
		r.OK = r.Error == ""
		out = append(out, r.classify())
	}
	return out, nil
}

// MaxHistoryFileBytes bounds a history file read by Files (and each offloaded payload
// beside it): far above what a server keeps for one run (its history size limit is 50 MB
// by default), so only a file that is not a history meets it.
const MaxHistoryFileBytes = 256 << 20

// readRegular reads a regular file of at most limit bytes; anything else (a FIFO, a
// device, a socket) is refused before it is opened, since reading one can block forever or
// never end.
func readRegular(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(st.Mode()))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit of a history file", path, st.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew past the %d-byte limit of a history file while it was read", path, limit)
	}
	return data, nil
}

// fileKind names a non-regular file's type for an error.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

func readHistory(path string) (*historypb.History, error) {
	data, err := readRegular(path, MaxHistoryFileBytes)
	if err != nil {
		return nil, err
	}
	h, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("parse history %s: %w", path, err)
	}
	if len(h.GetEvents()) == 0 || h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes() == nil {
		return nil, fmt.Errorf("history %s does not start with WorkflowExecutionStarted", path)
	}
	if err := complete(h); err != nil {
		return nil, fmt.Errorf("history %s is incomplete: %w; replaying it would check nothing past its end, so it is not reported ok (record it again, after a workflow task completed)", path, err)
	}
	return h, nil
}

// complete refuses a recorded history that checks nothing, or stops inside a workflow
// task: a replay only compares the commands of completed workflow tasks, so a file cut
// after its first events (or mid-task) would replay as ok whatever the workflow does now.
func complete(h *historypb.History) error {
	events := h.GetEvents()
	completed := false
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			completed = true
			break
		}
	}
	if !completed {
		return fmt.Errorf("its %d events hold no completed workflow task", len(events))
	}
	switch last := events[len(events)-1].GetEventType(); last {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		return fmt.Errorf("it ends inside a workflow task (last event %d is %s)", events[len(events)-1].GetEventId(), last)
	}
	return nil
}

// loadBlobs is an in-memory store of every file in dirs (those that exist), each checked
// against its name; nil when no dir exists.
func loadBlobs(dirs []string) (artifacts.Store, error) {
	var store artifacts.Store
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read offloaded payloads in %s: %w", dir, err)
		}
		if store == nil {
			if store, err = artifacts.Open("mem://"); err != nil {
				return nil, err
			}
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := readRegular(filepath.Join(dir, e.Name()), MaxHistoryFileBytes)
			if err != nil {
				store.Close()
				return nil, err
			}
			sum, err := store.PutBlob(context.Background(), data)
			if err != nil {
				store.Close()
				return nil, err
			}
			if sum != e.Name() {
				store.Close()
				return nil, fmt.Errorf("offloaded payload %s has sha256 %s; a blob's file is named by its sum", filepath.Join(dir, e.Name()), sum)
			}
		}
	}
	return store, nil
}

// quiet drops the replayer's own logging (a divergence is reported as the Result).
var quiet = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

// replayOne replays h against a fresh replayer (one per history: the replayer keeps results
// by workflow id) and returns the first divergence, "" when it replays.
func replayOne(register func(workflows.Registry), storage converter.ExternalStorage, h *historypb.History, id, runID string) string {
	rp, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{ExternalStorage: storage})
	if err != nil {
		return fmt.Sprintf("create replayer: %v", err)
	}
	register(rp)
	err = rp.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: runID},
	})
	if err == nil {
		return ""
	}
	if i := strings.Index(err.Error(), api.StoreCorruptLead); i >= 0 {
		// Not the workflows: a blob the history needs (an offloaded payload) changed.
		return storeCorrupt(err.Error()[i:])
	}
	return divergence(err, h)
}

// storeCorrupt is the line of a run whose replay failed on a changed blob: the text from
// "the stored bytes of …" on, to the end of its line (no proto dump), marked as the store's
// fault so nobody goes after the binary.
func storeCorrupt(s string) string {
	if j := strings.IndexAny(s, "\"\n"); j >= 0 {
		s = s[:j]
	}
	return strings.TrimSpace(s) + " " + storeCorruptNote
}

// storeCorruptNote ends the line of a run that failed on a changed blob.
const storeCorruptNote = "[the store changed, not the workflows: restore the blob, or end the run with `starter cancel <run> --terminate`]"

// failureMessage is the message of the failure the replayer reports a failed workflow task
// with (printed as a proto, stack trace included).
var failureMessage = regexp.MustCompile(`message:"((?:[^"\\]|\\.)*)"`)

// divergence is what the replayer reports, on one line: the nondeterminism message
// (history event vs replayed command), without the proto dump and stack trace around it,
// and each event's or command's attributes cut to the ids and names that tell them apart.
func divergence(err error, h *historypb.History) string {
	s := err.Error()
	if m := failureMessage.FindStringSubmatch(s); m != nil {
		s = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, " ").Replace(m[1])
	}
	s = readableLookup(s, h)
	s = strings.Join(strings.Fields(compactAttributes(s)), " ")
	const max = 600
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// activityLookup is the SDK's divergence when history scheduled an activity (event N)
// that the replayed code did not schedule there: it issued another command before it, or
// none. The SDK names the event by number only.
var activityLookup = regexp.MustCompile(`\[TMPRL1100\] (?:lookup failed for scheduledEventID to activityID: scheduleEventID: (\d+), activityID: \S+|unable to find activityID for the scheduledEventID: (\d+))`)

// readableLookup rewrites the SDK's activity lookup failure into the form of its other
// divergences, with the history event it names read from h: "nondeterministic workflow:
// history event 6 is ActivityTaskScheduled: (ActivityId:6, Name:FetchDocument, Name:nexo),
// and the replayed code did not schedule it there".
func readableLookup(s string, h *historypb.History) string {
	m := activityLookup.FindStringSubmatchIndex(s)
	if m == nil || h == nil {
		return s
	}
	num := s[m[2]:m[3]]
	if m[2] < 0 {
		num = s[m[4]:m[5]]
	}
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return s
	}
	event := fmt.Sprintf("history event %d", id)
	for _, ev := range h.GetEvents() {
		if ev.GetEventId() != id {
			continue
		}
		event += " is " + ev.GetEventType().String()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			event += fmt.Sprintf(": (ActivityId:%s, Name:%s, Name:%s)", a.GetActivityId(), a.GetActivityType().GetName(), a.GetTaskQueue().GetName())
		}
		break
	}
	readable := "[TMPRL1100] nondeterministic workflow: " + event +
		", and the replayed code did not schedule it there: it issued another command before it, or none"
	return s[:m[0]] + readable + s[m[1]:]
}

// telling are the attributes of an event or command that say which one it is.
var telling = regexp.MustCompile(`\b(ActivityId|TimerId|MarkerName|ChangeId|SignalName|WorkflowId|Name):([^,()\s]+)`)

// compactAttributes replaces every top-level parenthesised group of s by the telling
// attributes inside it: "(ActivityId:6, ActivityType:(Name:FetchDocument), …)" becomes
// "(ActivityId:6, Name:FetchDocument)".
func compactAttributes(s string) string {
	var b strings.Builder
	depth, start := 0, 0
	for i, r := range s {
		switch {
		case r == '(':
			if depth == 0 {
				start = i
			}
			depth++
		case r == ')' && depth > 0:
			depth--
			if depth == 0 {
				var keep []string
				for _, m := range telling.FindAllString(s[start:i+1], 4) {
					keep = append(keep, m)
				}
				b.WriteString("(" + strings.Join(keep, ", ") + ")")
			}
		case depth == 0:
			b.WriteRune(r)
		}
	}
	if depth > 0 { // unbalanced: keep the rest as it is
		b.WriteString(s[start:])
	}
	return b.String()
}

// typeSet is the workflow types a register function registers, by name. A workflow
// registered without a name (its function's name would be its type) makes the set
// unsure, and then only the replayer's own refusal tells (Result.classify).
type typeSet struct {
	names   map[string]bool
	unnamed bool
}

func (s *typeSet) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	if o.Name == "" {
		s.unnamed = true
		return
	}
	s.names[o.Name] = true
}

// registeredTypes runs register against a typeSet.
func registeredTypes(register func(workflows.Registry)) *typeSet {
	s := &typeSet{names: map[string]bool{}}
	register(s)
	return s
}

// foreign reports whether typ is certainly none of the registered types.
func (s *typeSet) foreign(typ string) bool { return !s.unnamed && typ != "" && !s.names[typ] }

// notThisBinary marks r as a run of a workflow type this binary does not register.
func (r Result) notThisBinary() Result {
	r.OK, r.NotThisBinary, r.Error = false, true, NotThisBinaryHint
	return r
}

// classify turns the replayer's refusal of an unregistered type (which registeredTypes
// could not foresee) into a NotThisBinary result.
func (r Result) classify() Result {
	if !r.OK && strings.Contains(r.Error, "unable to find workflow type") {
		return r.notThisBinary()
	}
	return r
}

// Print prints one line per result and a summary, and returns an error wrapping
// ErrDiverged when any failed. Runs of workflows this binary does not register are listed
// as skipped and fail nothing: another binary (the custom worker that runs them) checks
// them.
func Print(w io.Writer, results []Result) error {
	for _, r := range results {
		fmt.Fprintln(w, r)
	}
	err := failures(results)
	skipped := countSkipped(results)
	replayed := len(results) - skipped
	fmt.Fprintf(w, "%d replayed: %d ok, %d failed", replayed, replayed-countFailed(results), countFailed(results))
	if skipped > 0 {
		fmt.Fprintf(w, "; %d skipped: not workflows of this binary (run your worker's own check-replay for them)", skipped)
	}
	fmt.Fprintln(w)
	return err
}

// countFailed counts the results that did not replay, runs of other binaries' workflows
// left out.
func countFailed(results []Result) int {
	n := 0
	for _, r := range results {
		if !r.OK && !r.NotThisBinary {
			n++
		}
	}
	return n
}

func countSkipped(results []Result) int {
	n := 0
	for _, r := range results {
		if r.NotThisBinary {
			n++
		}
	}
	return n
}

// failures is an error wrapping ErrDiverged when any result failed, else nil.
func failures(results []Result) error {
	n := countFailed(results)
	if n == 0 {
		return nil
	}
	corrupt, unreadable := 0, 0
	results = slices.DeleteFunc(slices.Clone(results), func(r Result) bool { return r.NotThisBinary })
	for _, r := range results {
		if !r.OK && strings.HasSuffix(r.Error, storeCorruptNote) {
			corrupt++
		}
		if r.Unreadable {
			unreadable++
		}
	}
	if unreadable > 0 {
		if unreadable == n {
			return fmt.Errorf("%d of %d files %w", unreadable, len(results), ErrUnreadable)
		}
		return fmt.Errorf("%d of %d files %w; %d more runs %w", unreadable, len(results), ErrUnreadable, n-unreadable, ErrDiverged)
	}
	if corrupt == n {
		return fmt.Errorf("%d of %d runs %w", n, len(results), ErrStoreCorrupt)
	}
	if corrupt > 0 {
		return fmt.Errorf("%d of %d runs %w (%d more %v)", n-corrupt, len(results), ErrDiverged, corrupt, ErrStoreCorrupt)
	}
	return fmt.Errorf("%d of %d runs %w", n, len(results), ErrDiverged)
}
