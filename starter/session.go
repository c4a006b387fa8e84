package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/runs"
)

func sessionCmd() *command {
	return &command{
		name: "session", args: "prompt <agent> <instance> \"text\" | show <agent> <instance> | watch <agent> <instance> | list | close <agent> <instance>",
		summary: "Talk to a session: a remembering agent addressed by (agent, instance).",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, "print JSON")
			fs.Int64("from", -1, "watch: replay the activity stream from this offset (seq) first; default: only new updates")
			fs.Int("continue-after-turns", 0, "prompt: a session this prompt creates continues as new after this many turns per run (testing)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) == 0 {
				return usagef("want a subcommand: prompt, show, watch, list or close")
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
				if len(args) < 3 {
					return usagef(`session prompt wants the prompt text: session prompt %s %s "text"`, agent, inst)
				}
				rc, err := e.runs(ctx)
				if err != nil {
					return err
				}
				n, _ := fs.GetInt("continue-after-turns")
				reply, err := rc.Prompt(ctx, agent, inst, strings.Join(args[2:], " "), runs.PromptOptions{ContinueAfterTurns: n})
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(reply)
				}
				fmt.Fprintln(e.stdout, reply.Reply)
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
				for _, t := range view.Turns {
					fmt.Fprintf(e.stdout, "\n[%d] %s  you: %s\n", t.N, t.Started.Format(time.RFC3339), t.Prompt)
					if t.Error != "" {
						fmt.Fprintf(e.stdout, "    error: %s\n", t.Error)
					} else {
						fmt.Fprintf(e.stdout, "    %s: %s\n", agent, t.Reply)
					}
				}
				return nil
			case "watch":
				agent, inst, err := pair()
				if err != nil {
					return err
				}
				from, _ := fs.GetInt64("from")
				return watchSession(ctx, e, agent, inst, from, asJSON)
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
			return unknownSubcommand("session subcommand", sub, "prompt", "show", "watch", "list", "close")
		},
	}
}

// watchSession prints the session's activity stream: from offset `from` when given
// (archived segments first), then live until the session closes or Ctrl-C.
func watchSession(ctx context.Context, e *env, agent, inst string, from int64, asJSON bool) error {
	rc, err := e.runs(ctx)
	if err != nil {
		return err
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
		archived(rec, from-1, first)
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
// call's live text (read from the call's heartbeat, not in the stream), which flows on one
// line as the model writes it; the call's text event then adds only what the line misses.
// With asJSON, every event and every live delta is one JSON object per line (a delta:
// {"type":"live","call","from","text"}, from = its byte offset in the reply).
type streamPrinter struct {
	w      io.Writer
	asJSON bool
	open   string                // the call whose live line is open, without its newline
	shown  map[string]*liveShown // live text printed, by call, until the call's text event
	now    func() time.Time      // the live line's clock (tests set it)
}

// liveShown is the live text printed of one call: the reply's bytes from start, in text.
type liveShown struct {
	start int
	text  strings.Builder
}

// live prints new live text of a call (runs.Client.FollowSessionLive).
func (p *streamPrinter) live(l api.LiveText) {
	if p.asJSON {
		b, _ := json.Marshal(map[string]any{"type": "live", "call": l.Call, "from": l.From, "text": l.Text})
		fmt.Fprintln(p.w, string(b))
		return
	}
	if p.shown == nil {
		p.shown = map[string]*liveShown{}
	}
	s := p.shown[l.Call]
	if s != nil && l.From == s.start+s.text.Len() && p.open == l.Call {
		s.text.WriteString(l.Text)
		fmt.Fprint(p.w, l.Text)
		return
	}
	mark := ""
	switch {
	case s == nil && l.From > 0, s != nil && l.From != s.start+s.text.Len():
		// A gap (the start was never seen) or text rewritten by a retried attempt: what
		// the line shows next starts at byte From.
		mark = "…"
		s = nil
	}
	if s == nil {
		s = &liveShown{start: l.From}
		p.shown[l.Call] = s
	}
	s.text.WriteString(l.Text)
	p.closeLine()
	at := time.Now()
	if p.now != nil {
		at = p.now()
	}
	fmt.Fprintf(p.w, "#%-4s %s text: %s%s", "live", at.UTC().Format("15:04:05.000"), mark, l.Text)
	p.open = l.Call
}

// event prints one activity-stream event. A text event of a call whose live text was
// printed adds the rest of the text to its line; if the text is not what the line
// showed, it is printed whole, on a line of its own.
func (p *streamPrinter) event(ev api.Event) {
	if p.asJSON {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(p.w, string(b))
		return
	}
	if ev.Type == api.StreamText {
		var d struct{ Content, Call string }
		_ = json.Unmarshal(ev.Data, &d)
		if s := p.shown[d.Call]; s != nil && d.Call != "" {
			delete(p.shown, d.Call)
			end := s.start + s.text.Len()
			if end <= len(d.Content) && d.Content[s.start:end] == s.text.String() {
				rest := d.Content[end:]
				switch {
				case p.open == d.Call:
					fmt.Fprintln(p.w, rest)
					p.open = ""
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

// closeLine ends an open live line.
func (p *streamPrinter) closeLine() {
	if p.open != "" {
		fmt.Fprintln(p.w)
		p.open = ""
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
	case api.StreamTurnEnd:
		if e := str("error"); e != "" {
			return prefix + "turn end (error: " + e + ")"
		}
		return prefix + "turn end"
	}
	return prefix + ev.Type + " " + string(ev.Data)
}
