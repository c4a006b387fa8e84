package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

func sessionCmd() *command {
	return &command{
		name: "session", args: "prompt <agent> <instance> \"text\" | interrupt <agent> <instance> | show <agent> <instance> | watch <agent> <instance> | fork <agent> <instance> --at <turn> | list | close <agent> <instance>",
		summary: "Talk to a session: a remembering agent addressed by (agent, instance).",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, "print JSON")
			fs.Int64("from", -1, "watch: replay the activity stream from this offset (seq) first, then follow")
			fs.Int("last", -1, "watch: show the last N updates first, then follow (0: only new ones); default: the last turn")
			fs.Int("continue-after-turns", 0, "prompt, fork: a session this command creates continues as new after this many turns per run (testing)")
			fs.String("at", "", "fork: the turn to fork at (its number in `session show`): the new instance starts as that turn found the session and asks its prompt again")
			fs.String("id", "", "fork: the new instance's id (default: a new UUIDv7)")
			fs.String("prompt", "", "fork: ask this instead of the forked turn's prompt")
			fs.Int("max-turns", 0, fmt.Sprintf("prompt: bound this turn's model calls (1-%d; default: the agent's max_turns)", api.MaxPromptTurns))
			fs.String("dir", "", "prompt: run this turn's tools in this directory, relative to the workspace")
			fs.String("steer", "", "prompt: hand this message to the turn in flight, for its next model call, instead of prompting")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: prompt, interrupt, show, watch, fork, list or close")
			}
			asJSON, _ := fs.GetBool("json")
			sub, args := args[0], args[1:]
			pair := func() (string, string, error) {
				if len(args) < 2 {
					return "", "", usagef("session %s wants an agent and an instance id", sub)
				}
				if err := api.ValidateInstance(args[1]); err != nil {
					return "", "", usagef("%v", err)
				}
				return args[0], args[1], nil
			}
			switch sub {
			case "prompt":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				if fs.Changed("steer") {
					return steerSession(ctx, e, fs, agent, inst, args[2:], asJSON)
				}
				if len(args) < 3 {
					return usagef(`session prompt wants the prompt text: session prompt %s %s "text"`, agent, inst)
				}
				maxTurns, _ := fs.GetInt("max-turns")
				if fs.Changed("max-turns") && (maxTurns < 1 || maxTurns > api.MaxPromptTurns) {
					return usagef("--max-turns %d: want a number of model calls from 1 to %d (leave it out for the agent's max_turns)", maxTurns, api.MaxPromptTurns)
				}
				dir, _ := fs.GetString("dir")
				if _, err := api.CleanDir(dir); err != nil {
					return usagef("--dir: %v", err)
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				n, _ := fs.GetInt("continue-after-turns")
				stop := noticeApprovals(ctx, e, rc, agent, inst)
				var note string
				reply, err := rc.Prompt(ctx, agent, inst, strings.Join(args[2:], " "), runs.PromptOptions{ContinueAfterTurns: n,
					OnRetry: func(s string) { note = s }, MaxTurns: maxTurns, Dir: dir})
				stop()
				if err != nil {
					return err
				}
				if asJSON {
					// The reply, and the note of a prompt sent again during a handover.
					return e.printJSON(struct {
						api.PromptReply
						RetryNote string `json:"retry_note,omitempty"`
					}{reply, note})
				}
				if note != "" {
					fmt.Fprintf(e.stderr, "note: %s\n", note)
				}
				if reply.Interrupted {
					fmt.Fprintf(e.stderr, "turn %d was interrupted before its answer; the session takes the next prompt\n", reply.Turn)
					return nil
				}
				fmt.Fprintln(e.stdout, reply.Reply)
				return nil
			case "interrupt":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				reply, err := rc.Interrupt(ctx, agent, inst)
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(reply)
				}
				fmt.Fprintf(e.stdout, "interrupted turn %d of session %s; it takes the next prompt\n", reply.Turn, api.SessionID(agent, inst))
				return nil
			case "show":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				view, err := rc.Session(ctx, agent, inst)
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(view)
				}
				turns := max(view.TurnCount, len(view.Turns))
				fmt.Fprintf(e.stdout, "Session %s (%s, %d turns, %d runs)\n", view.ID, view.Status, turns, view.Runs)
				if turns > len(view.Turns) {
					fmt.Fprintf(e.stdout, "(the newest %d turns; every turn is in `session watch %s %s --from 0`)\n", len(view.Turns), agent, inst)
				}
				rec, err := rc.Get(ctx, view.ID)
				if err != nil {
					return err
				}
				if rec.Usage != nil {
					fmt.Fprintf(e.stdout, "Usage: %s (the whole session)\n", rec.Usage.Summary())
				}
				for _, t := range view.Turns {
					fmt.Fprintf(e.stdout, "\n[%d] %s  you: %s\n", t.N, t.Started.Format(time.RFC3339), t.Prompt)
					if t.Interrupted {
						fmt.Fprintf(e.stdout, "    (interrupted)\n")
					} else if t.Error != "" {
						fmt.Fprintf(e.stdout, "    error: %s\n", t.Error)
					} else {
						fmt.Fprintf(e.stdout, "    %s: %s\n", agent, t.Reply)
					}
				}
				printTurnInFlight(e.stdout, rec)
				return nil
			case "watch":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				from, _ := fs.GetInt64("from")
				lastN, _ := fs.GetInt("last")
				return watchSession(ctx, e, agent, inst, from, lastN, asJSON)
			case "fork":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				return forkSession(ctx, e, fs, agent, inst, asJSON)
			case "list":
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				rows, err := rc.ListSessions(ctx, 100)
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(rows)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "AGENT\tINSTANCE\tSTATUS\tSTARTED")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Agent, r.Instance, r.Status, r.CreatedAt.Format(time.RFC3339))
				}
				return tw.Flush()
			case "close":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				if err := rc.CloseSession(ctx, agent, inst); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "closed session %s\n", api.SessionID(agent, inst))
				return nil
			}
			return unknownSubcommand("session subcommand", sub, "prompt", "interrupt", "show", "watch", "fork", "list", "close")
		},
	}
}

// steerSession hands --steer's text to the turn in flight of (agent, inst), for its next
// model call, and says which turn took it.
func steerSession(ctx context.Context, e *env, fs *pflag.FlagSet, agent, inst string, rest []string, asJSON bool) error {
	text, _ := fs.GetString("steer")
	if strings.TrimSpace(text) == "" {
		return usagef("--steer is empty: give the message for the turn in flight")
	}
	if len(rest) > 0 {
		return usagef("session prompt --steer takes no prompt text (got %q): the steer is the message; send a prompt without --steer", strings.Join(rest, " "))
	}
	if fs.Changed("max-turns") || fs.Changed("dir") {
		return usagef("--max-turns and --dir are options of a new turn; a steer joins the turn in flight as it is")
	}
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	reply, err := rc.Steer(ctx, agent, inst, text)
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(reply)
	}
	fmt.Fprintf(e.stdout, "turn %d took the message at its next model call\n", reply.Turn)
	return nil
}

// forkSession opens a new instance of agent from turn --at of the session (agent, inst)
// and prints its first reply: the turn's prompt (or --prompt) asked again, from the
// thread and workspace the turn found.
func forkSession(ctx context.Context, e *env, fs *pflag.FlagSet, agent, inst string, asJSON bool) error {
	at, _ := fs.GetString("at")
	if at == "" {
		return usagef("session fork needs --at <turn> (the turns are numbered in `starter session show %s %s`)", agent, inst)
	}
	turn, err := strconv.Atoi(at)
	if err != nil || turn < 1 {
		return usagef("--at %q is not a turn number: want 1 for the first turn, as `starter session show %s %s` numbers them", at, agent, inst)
	}
	req := runs.SessionForkRequest{Agent: agent, Instance: inst, Turn: turn}
	req.NewInstance, _ = fs.GetString("id")
	if req.NewInstance != "" {
		if err := api.ValidateInstance(req.NewInstance); err != nil {
			return usagef("--id: %v", err)
		}
	}
	req.Prompt, _ = fs.GetString("prompt")
	if fs.Changed("prompt") && strings.TrimSpace(req.Prompt) == "" {
		return usagef("--prompt is empty: leave it out to ask turn %d's prompt again", turn)
	}
	req.ContinueAfterTurns, _ = fs.GetInt("continue-after-turns")
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	st, err := e.artifactStore(ctx)
	if err != nil {
		return err
	}
	if req.NewInstance == "" {
		// Named here, so the approval notice can follow the fork while its turn runs.
		u, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("generate an instance id: %w", err)
		}
		req.NewInstance = u.String()
	}
	stop := noticeApprovals(ctx, e, rc, agent, req.NewInstance)
	res, err := rc.ForkSession(ctx, st, req)
	stop()
	var ut *runs.UnknownTurnError
	if errors.As(err, &ut) {
		return usagef("%v", ut)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(res)
	}
	fmt.Fprintf(e.stdout, "session %s %s: forked from %s at turn %d\n", res.Agent, res.Instance, res.From, res.Turn)
	fmt.Fprintln(e.stdout, res.Reply.Reply)
	return nil
}

// watchSession prints the session's activity stream, then follows it live until the
// session closes or Ctrl-C, as tail -f does: first the updates from offset `from` when
// given (archived segments first), else the last lastN updates when lastN >= 0, else the
// last turn (from its user_input on).
func watchSession(ctx context.Context, e *env, agent, inst string, from int64, lastN int, asJSON bool) error {
	rc, err := e.runs(ctx)
	if err != nil {
		return err
	}
	waited, err := awaitSession(ctx, e, rc, agent, inst)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if waited && from < 0 && lastN < 0 {
		from = 1 // it began while we waited: all of it, its first user_input on
	}
	// Right after a continue-as-new the new run may not have run its first task yet (the
	// server spaces continue-as-new runs at least workflowIdReuseMinimalInterval apart)
	// and shows only what history holds; wait for it, briefly, so the record carries the
	// stream.
	var rec api.Record
	for deadline := time.Now().Add(10 * time.Second); ; {
		if rec, err = rc.Get(ctx, api.SessionID(agent, inst)); err != nil {
			return err
		}
		if (rec.Status != api.StatusPending && rec.Status != api.StatusQueued) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	last := lastSeq(rec)
	if from < 0 {
		from = watchStart(ctx, rc, agent, inst, rec, lastN)
	}
	out := &streamPrinter{w: e.stdout, asJSON: asJSON}
	defer out.end()
	print := out.event
	// archived prints the events with seq in (after, before) from the record's archived
	// stream segments: a replay from an old offset, or the runs a watcher missed because
	// the session continued as new more than once between two looks.
	var archErr error
	archived := func(r api.Record, after, before int64) {
		st, err := e.artifactStore(ctx)
		if err != nil {
			archErr = err
			return
		}
		evs, err := artifacts.StreamEvents(ctx, st, r, after, before)
		for _, ev := range evs {
			print(ev)
			last = max(last, ev.Seq)
		}
		if err != nil {
			archErr = storeHint(err)
		}
	}
	if from >= 0 {
		first := int64(1 << 62)
		if len(rec.Events) > 0 {
			first = rec.Events[0].Seq
		}
		last = from - 1
		if from < first {
			archived(rec, from-1, first)
		}
		for _, ev := range rec.Events {
			if ev.Seq >= from {
				print(ev)
				last = ev.Seq
			}
		}
		if archErr != nil {
			return archErr
		}
	}
	err = rc.FollowSessionLive(ctx, agent, inst, func(r api.Record) bool {
		if len(r.Events) > 0 && r.Events[0].Seq > last+1 {
			if archived(r, last, r.Events[0].Seq); archErr != nil {
				return true // the missed events cannot be shown: stop and say why
			}
		}
		for _, ev := range r.Events {
			if ev.Seq > last {
				last = ev.Seq
				print(ev)
			}
		}
		return false
	}, out.live)
	if archErr != nil {
		return fmt.Errorf("read the session's archived stream: %w", archErr)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// streamPrinter prints a session's activity stream: one line per event, except a model
// call's live text and live thinking (read from the call's heartbeat, not in the stream),
// each of which flows on one line as the model writes it; the call's text (thinking)
// event then adds only what the line misses. With asJSON, every event and every live
// delta is one JSON object per line (a delta: {"type":"live","call","from","text"} of the
// text, {"type":"live_thinking",...} of the thinking, from = its byte offset in the
// reply's text or reasoning).
type streamPrinter struct {
	w      io.Writer
	asJSON bool
	open   livePart                // the part whose live line is open, without its newline
	shown  map[livePart]*liveShown // live text and thinking printed, until the call's event
	now    func() time.Time        // the live line's clock (tests set it)
}

// livePart names one live line's source: a call's text or its thinking (kind is the
// stream event that completes it, api.StreamText or api.StreamThinking). Zero: none.
type livePart struct{ kind, call string }

// liveShown is the live text printed of one call: the reply's bytes from start, in text.
type liveShown struct {
	start int
	text  strings.Builder
}

// live prints new live text or thinking of a call (runs.Client.FollowSessionLive).
func (p *streamPrinter) live(l api.LiveText) {
	part, from, text := livePart{api.StreamText, l.Call}, l.From, l.Text
	if l.Thinking != nil {
		part, from, text = livePart{api.StreamThinking, l.Call}, l.Thinking.From, l.Thinking.Text
	}
	if p.asJSON {
		typ := "live"
		if part.kind == api.StreamThinking {
			typ = "live_thinking"
		}
		b, _ := json.Marshal(map[string]any{"type": typ, "call": l.Call, "from": from, "text": text})
		fmt.Fprintln(p.w, string(b))
		return
	}
	if p.shown == nil {
		p.shown = map[livePart]*liveShown{}
	}
	s := p.shown[part]
	if s != nil && from == s.start+s.text.Len() && p.open == part {
		s.text.WriteString(text)
		fmt.Fprint(p.w, text)
		return
	}
	mark := ""
	switch {
	case s == nil && from > 0, s != nil && from != s.start+s.text.Len():
		// A gap (the start was never seen) or text rewritten by a retried attempt: what
		// the line shows next starts at byte From.
		mark = "…"
		s = nil
	}
	if s == nil {
		s = &liveShown{start: from}
		p.shown[part] = s
	}
	s.text.WriteString(text)
	p.closeLine()
	at := time.Now()
	if p.now != nil {
		at = p.now()
	}
	fmt.Fprintf(p.w, "#%-4s %s %s: %s%s", "live", at.UTC().Format("15:04:05.000"), part.kind, mark, text)
	p.open = part
}

// event prints one activity-stream event. A text (thinking) event of a call whose live
// text (thinking) was printed adds the rest to its line; if it is not what the line
// showed, it is printed whole, on a line of its own.
func (p *streamPrinter) event(ev api.Event) {
	if p.asJSON {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(p.w, string(b))
		return
	}
	if ev.Type == api.StreamText || ev.Type == api.StreamThinking {
		var d struct {
			Content, Call string
			Ref           string `json:"content_ref"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		part := livePart{ev.Type, d.Call}
		if s := p.shown[part]; s != nil && d.Call != "" {
			delete(p.shown, part)
			if rest, ok := liveRest(s, d.Content, d.Ref != ""); ok {
				switch {
				case p.open == part:
					fmt.Fprintln(p.w, rest)
					p.open = livePart{}
				case rest != "": // the live line was ended by another event
					p.closeLine()
					fmt.Fprintf(p.w, "%s…%s\n", strings.TrimSuffix(streamLine(ev), d.Content), rest)
				}
				return
			}
		}
	}
	if ev.Type == api.StreamTurnEnd {
		p.shown = nil // a call that failed has no text event
	}
	p.closeLine()
	fmt.Fprintln(p.w, streamLine(ev))
}

// liveRest is what an event's content adds to the live line s showed of it, and false
// when the line showed something else (the event is then printed whole). Reasoning
// stored by reference (preview) has as content its start and a note of its whole size:
// the line, which may have shown more of it live, gets what it misses of the start, and
// the note.
func liveRest(s *liveShown, content string, preview bool) (string, bool) {
	shown, end := s.text.String(), s.start+s.text.Len()
	if preview {
		if i := strings.LastIndex(content, "\n[… "); i >= 0 {
			head, note := content[:i], content[i+1:]
			switch {
			case end <= len(head) && head[s.start:end] == shown:
				return head[end:] + " " + note, true
			case s.start <= len(head) && strings.HasPrefix(shown, head[s.start:]):
				return " " + note, true
			}
			return "", false
		}
	}
	if end <= len(content) && content[s.start:end] == shown {
		return content[end:], true
	}
	return "", false
}

// closeLine ends an open live line.
func (p *streamPrinter) closeLine() {
	if p.open != (livePart{}) {
		fmt.Fprintln(p.w)
		p.open = livePart{}
	}
}

// end ends the output (a live line left open when the watch stops).
func (p *streamPrinter) end() { p.closeLine() }

// streamLine renders one activity-stream update for a terminal.
func streamLine(ev api.Event) string {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	prefix := fmt.Sprintf("#%-4d %s ", ev.Seq, ev.At.Format("15:04:05.000"))
	switch ev.Type {
	case api.StreamUserInput:
		return prefix + "you: " + str("text")
	case api.StreamText:
		return prefix + "text: " + str("content")
	case api.StreamThinking:
		return prefix + "thinking: " + str("content")
	case api.StreamToolCall:
		if str("status") == "started" {
			args, _ := json.Marshal(d["args"])
			return fmt.Sprintf("%stool %s %s %s", prefix, str("id"), str("name"), args)
		}
		return fmt.Sprintf("%stool %s %s: %.200s", prefix, str("id"), str("status"), str("content"))
	case api.StreamPlan:
		return prefix + "plan: " + planLine(d["steps"])
	case api.StreamSteer:
		return prefix + "you (steer): " + str("text")
	case api.StreamTurnEnd:
		if d["interrupted"] == true {
			return prefix + "turn end (interrupted)"
		}
		if e := str("error"); e != "" {
			return prefix + "turn end (error: " + e + ")"
		}
		return prefix + "turn end"
	}
	return prefix + ev.Type + " " + string(ev.Data)
}

// sessionPoll is how often a watch opened before its session's first prompt looks for it.
const sessionPoll = 250 * time.Millisecond

// awaitSession returns once the session exists (waited: it did not at first), as the
// session page does: a watch opened before the first prompt says on stderr that it waits
// for one and what starts it, instead of failing with "no run session:…". Ctrl-C ends the
// wait (nil error, ctx done).
func awaitSession(ctx context.Context, e *env, rc *runs.Client, agent, inst string) (waited bool, err error) {
	id := api.SessionID(agent, inst)
	for {
		ok, err := rc.Exists(ctx, id)
		if ok || err != nil {
			if ctx.Err() != nil {
				return waited, nil
			}
			return waited, err
		}
		if !waited {
			fmt.Fprintf(e.stderr, "no session %s %s yet: waiting for its first prompt (starter session prompt %s %s \"...\"); Ctrl-C to stop\n",
				agent, inst, agent, inst)
			waited = true
		}
		select {
		case <-ctx.Done():
			return waited, nil
		case <-time.After(sessionPoll):
		}
	}
}

// watchStart is where a watch without --from starts: the last lastN updates (lastN >= 0),
// else the last turn's user_input; -1 means only new updates.
func watchStart(ctx context.Context, rc *runs.Client, agent, inst string, rec api.Record, lastN int) int64 {
	if lastN == 0 {
		return -1
	}
	for i := len(rec.Events) - 1; lastN < 0 && i >= 0; i-- {
		if rec.Events[i].Type == api.StreamUserInput {
			return rec.Events[i].Seq
		}
	}
	end := lastSeq(rec)
	// The window the record carries is empty or began after the last turn (the session
	// continued as new since): the materialised history knows the offsets.
	view, err := rc.Session(ctx, agent, inst)
	if err == nil {
		end = max(end, view.StreamOffset)
	}
	switch {
	case lastN > 0 && end > 0:
		return max(0, end-int64(lastN)+1)
	case lastN < 0 && err == nil && len(view.Turns) > 0:
		return view.Turns[len(view.Turns)-1].FirstSeq
	}
	return -1
}

// turnInFlight is the session's turn that has begun and not ended: its user_input event.
func turnInFlight(rec api.Record) (api.Event, bool) {
	for i := len(rec.Events) - 1; i >= 0; i-- {
		switch rec.Events[i].Type {
		case api.StreamTurnEnd:
			return api.Event{}, false
		case api.StreamUserInput:
			return rec.Events[i], true
		}
	}
	return api.Event{}, false
}

// printTurnInFlight adds to `session show` the turn under way, if any, and the tool call
// it waits on for a human, with the command that decides it.
func printTurnInFlight(w io.Writer, rec api.Record) {
	if ev, ok := turnInFlight(rec); ok {
		var d struct {
			Text string
			Turn int
		}
		_ = json.Unmarshal(ev.Data, &d)
		fmt.Fprintf(w, "\n[%d] %s  you: %s\n    (under way)\n", d.Turn, ev.At.Format(time.RFC3339), d.Text)
	}
	a, ok := rec.Approval()
	if !ok || rec.Status != api.StatusSuspended {
		return
	}
	if text, ok := budgetPauseText(a); ok {
		fmt.Fprintf(w, "\nPending: budget pause %s: %s\n", a.CallID, text)
	} else {
		fmt.Fprintf(w, "\nPending: tool call %s: %s (%s) %s\n", a.CallID, a.Tool, a.Capability, argsText(a.Args))
	}
	fmt.Fprintln(w, nextSteps(rec))
}

// budgetPauseText is a budget pause for people, "agent counter used 36 of 1 tokens in this
// turn (tokens 36 of 1 (reached), cost $0.000506)", and false for a tool call (or a pause
// whose figures cannot be read).
func budgetPauseText(a api.ApprovalInfo) (string, bool) {
	var bp api.BudgetPause
	if a.Capability != api.CapabilityBudget || json.Unmarshal(a.Args, &bp) != nil || bp.Agent == "" {
		return "", false
	}
	return bp.Detail() + " (" + bp.Figures() + ")", true
}

func argsText(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		return ""
	}
	return fmt.Sprintf("%.300s", args)
}

// noticeApprovals follows the session while a prompt waits for its reply and prints to
// stderr each tool call the session waits on for a human, with the command that decides
// it: without it a prompt says nothing until the turn ends. stop ends the follow; nothing
// is printed after it returns.
func noticeApprovals(ctx context.Context, e *env, rc *runs.Client, agent, inst string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		shown := ""
		for ctx.Err() == nil {
			// Errors are not reported: the notice is an aid, the prompt says what failed.
			_ = rc.FollowSession(ctx, agent, inst, func(r api.Record) bool {
				a, ok := r.Approval()
				if !ok || r.Status != api.StatusSuspended || a.CallID == shown || ctx.Err() != nil {
					return false
				}
				shown = a.CallID
				if text, ok := budgetPauseText(a); ok {
					// A budget pause: what it spent, not its JSON.
					fmt.Fprintf(e.stderr, "session %s is waiting for your raise of its budget (call %s): %s\n", r.ID, a.CallID, text)
				} else {
					fmt.Fprintf(e.stderr, "session %s is waiting for your approval of %s (call %s) %s\n", r.ID, a.Tool, a.CallID, argsText(a.Args))
				}
				fmt.Fprintln(e.stderr, nextSteps(r))
				return false
			})
			// A new session has no run until the prompt starts it, a closed one reopens,
			// and a follow ends at a continue-as-new it could not follow: look again.
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// waitTurn follows a session after a decision on tool call decided, printing its updates
// to stderr, until the turn ends (its turn_end after afterSeq) or waits on another tool
// call; then prints the outcome to stderr as well, and the turn's reply alone to stdout
// (as `session prompt` prints it), as waitRun does with a run's result. A turn that
// failed is an error.
func waitTurn(ctx context.Context, e *env, rc *runs.Client, agent, inst, decided string, afterSeq int64) error {
	id := api.SessionID(agent, inst)
	last := afterSeq
	var end *api.Event
	var again api.Record
	out := &streamPrinter{w: e.stderr}
	err := rc.FollowSessionLive(ctx, agent, inst, func(r api.Record) bool {
		if len(r.Events) > 0 && r.Events[0].Seq > last+1 {
			// The session continued as new since the last look, which it does only
			// between turns: the turn ended in a run no longer followed.
			end = &api.Event{Type: api.StreamTurnEnd}
			return true
		}
		for _, ev := range r.Events {
			if ev.Seq <= last {
				continue
			}
			last = ev.Seq
			out.event(ev)
			if ev.Type == api.StreamTurnEnd {
				end = &ev
				return true
			}
		}
		if a, ok := r.Approval(); ok && r.Status == api.StatusSuspended && a.CallID != decided {
			again = r
			return true
		}
		return false
	}, out.live)
	out.end()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	switch {
	case again.ID != "":
		fmt.Fprintf(e.stderr, "session %s is %s\n", id, statusDetail(again))
		fmt.Fprintln(e.stderr, nextSteps(again))
		return nil
	case end == nil:
		rec, err := rc.Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "session %s is %s\n", id, statusDetail(rec))
		return nil
	}
	var d struct {
		Turn  int
		Error string
	}
	_ = json.Unmarshal(end.Data, &d)
	// The turn's reply is in the materialised history (the newest turn when turn_end
	// was missed).
	view, verr := rc.Session(ctx, agent, inst)
	var turn *api.SessionTurn
	for i := range view.Turns {
		if t := &view.Turns[i]; t.N == d.Turn || d.Turn == 0 && i == len(view.Turns)-1 {
			turn = t
		}
	}
	if turn != nil {
		d.Turn, d.Error = turn.N, turn.Error
	}
	if d.Error != "" {
		return fmt.Errorf("turn %d of session %s failed: %s", d.Turn, id, d.Error)
	}
	fmt.Fprintf(e.stderr, "turn %d of session %s ended\n", d.Turn, id)
	if turn == nil {
		return verr
	}
	fmt.Fprintln(e.stdout, turn.Reply)
	return nil
}
