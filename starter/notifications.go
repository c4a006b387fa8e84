package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nexo-temporal/nexo/api"
)

// notificationsCmd shows the receivers' outboxes: what is not delivered yet and what was
// given up, with attempts and the last error.
func notificationsCmd() *command {
	return &command{
		name: "notifications", args: "",
		summary: "Show the approval notifications not delivered yet and those given up, by receiver, with attempts and last error.",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, "print JSON (one object per receiver)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			rc, err := e.runs(ctx)
			if err != nil {
				return err
			}
			outboxes, err := rc.Notifications(ctx)
			if err != nil {
				return err
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				if outboxes == nil {
					outboxes = []api.NotifierStatus{}
				}
				return e.printJSON(outboxes)
			}
			printNotifications(e, outboxes)
			return nil
		},
	}
}

func printNotifications(e *env, outboxes []api.NotifierStatus) {
	if len(outboxes) == 0 {
		fmt.Fprintln(e.stdout, "No notification outbox: no run on this task queue has notified a receiver (approvals.notify) since the outboxes came.")
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVER\tPENDING\tFAILED\tDELIVERED")
	var items []api.NotifyItem
	var receivers []string
	for _, o := range outboxes {
		if o.Error != "" {
			fmt.Fprintf(tw, "%s\t?\t?\t?\n", o.ID)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", o.Receiver, len(o.Pending), len(o.Failed), o.Delivered)
		for _, it := range append(append([]api.NotifyItem(nil), o.Pending...), o.Failed...) {
			items = append(items, it)
			receivers = append(receivers, o.Receiver)
		}
	}
	tw.Flush()
	for _, o := range outboxes {
		if o.Error != "" {
			fmt.Fprintf(e.stderr, "%s did not answer: %s\n", o.ID, o.Error)
		}
	}
	if len(items) == 0 {
		return
	}
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tRECEIVER\tRUN\tSEQ\tEVENT\tCALL\tATTEMPTS\tSINCE\tLAST ERROR")
	for i, it := range items {
		status := it.Status
		if status == api.NotifyPending && it.NextAttempt != nil {
			status += " (next " + it.NextAttempt.UTC().Format(time.TimeOnly) + ")"
		}
		last := strings.ReplaceAll(it.LastError, "\n", " ")
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", status, receivers[i], it.RunID, it.Seq, it.Event, it.CallID, it.Attempts,
			it.At.UTC().Format(time.RFC3339), last)
	}
	tw.Flush()
}
