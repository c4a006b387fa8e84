// Command worker runs Nexo's workflows and activities on a Temporal task queue. With --dev
// it first starts an embedded Temporal server (SQLite file under .nexo/, plus the Web UI),
// so one command gives a complete local platform.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/connect"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, argv []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.Bool("dev", false, "start an embedded Temporal server (SQLite under .nexo/, Web UI) and run the worker against it")
	config.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: worker [--dev] [flags]\n\nRuns Nexo's workflows and activities on a Temporal task queue.\n\nFlags:")
		fmt.Fprint(stderr, fs.FlagUsages())
	}
	if err := fs.Parse(argv); err != nil {
		return err
	}
	cfg, err := config.Load(config.LoadOptions{Flags: fs})
	if err != nil {
		return err
	}
	logger := cfg.NewLogger(stderr)

	if *dev {
		srv, err := devserver.Start(ctx, devserver.Options{
			IP:           cfg.Dev.IP,
			FrontendPort: cfg.Dev.FrontendPort,
			UIPort:       cfg.Dev.UIPort,
			DBPath:       cfg.Dev.DBPath,
			Namespace:    cfg.Temporal.Namespace,
			Logger:       logger,
		})
		if err != nil {
			return fmt.Errorf("start embedded Temporal server: %w", err)
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Error("stop embedded Temporal server", "error", err)
			}
		}()
		cfg.Temporal.Address = srv.FrontendAddress()
		fmt.Fprintf(stdout, "Temporal server: %s (namespace %s, database %s)\n", srv.FrontendAddress(), cfg.Temporal.Namespace, cfg.Dev.DBPath)
		if ui := srv.UIAddress(); ui != "" {
			fmt.Fprintf(stdout, "Temporal Web UI: %s/namespaces/%s/workflows\n", ui, cfg.Temporal.Namespace)
		}
	}

	tc, err := connect.Dial(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := checkSearchAttribute(ctx, tc, cfg.Temporal.Namespace); err != nil {
		return err
	}

	store, err := artifacts.Open(cfg.Artifacts.URL)
	if err != nil {
		return err
	}
	sandboxes, err := activities.NewSandboxes(cfg.Sandbox.Root)
	if err != nil {
		return err
	}
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{
		// On Ctrl-C, running activities get this long to finish before the worker exits;
		// whatever does not finish is retried by Temporal on the next worker.
		WorkerStopTimeout: 10 * time.Second,
	})
	workflows.RegisterAll(w)
	deps := activities.Deps{Store: store, Sandboxes: sandboxes, InlineLimit: cfg.Artifacts.InlineLimit,
		Agents: cfg.Agents, ShellTimeout: cfg.Sandbox.ShellTimeout}
	if cfg.LLM.BaseURL != "" {
		deps.LLM = activities.NewLLM(activities.LLMConfig{BaseURL: cfg.LLM.BaseURL, Model: cfg.LLM.Model,
			APIKey: cfg.LLM.APIKey(os.Getenv), Timeout: cfg.LLM.Timeout})
	}
	activities.New(deps).Register(w)

	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.Temporal.TaskQueue, err)
	}
	if len(cfg.Agents) > 0 {
		names := make([]string, len(cfg.Agents))
		for i, a := range cfg.Agents {
			names[i] = a.Name
		}
		fmt.Fprintf(stdout, "Agents: %s (model %s at %s)\n", strings.Join(names, ", "), cfg.LLM.Model, cfg.LLM.BaseURL)
	}
	fmt.Fprintf(stdout, "Nexo worker ready: task queue %s at %s\n", cfg.Temporal.TaskQueue, cfg.Temporal.Address)
	logger.Info("worker ready", slog.String("task_queue", cfg.Temporal.TaskQueue), slog.String("address", cfg.Temporal.Address))
	<-ctx.Done()
	logger.Info("shutting down")
	w.Stop()
	return nil
}

// checkSearchAttribute fails fast when the namespace lacks NexoStatus: without it every
// status upsert fails and `starter list --status` cannot work.
func checkSearchAttribute(ctx context.Context, tc client.Client, namespace string) error {
	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	if t, ok := resp.GetCustomAttributes()[api.SearchAttributeStatus]; ok {
		if t != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			return fmt.Errorf("search attribute %s in namespace %s has type %s, want Keyword", api.SearchAttributeStatus, namespace, t)
		}
		return nil
	}
	return fmt.Errorf("search attribute %s is not registered in namespace %s; create it with: temporal operator search-attribute create --namespace %s --name %s --type Keyword",
		api.SearchAttributeStatus, namespace, namespace, api.SearchAttributeStatus)
}
