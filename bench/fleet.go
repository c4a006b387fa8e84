package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/artifacts"
	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/fakellm"
	"github.com/nexo-temporal/nexo/internal/cluster"
	"github.com/nexo-temporal/nexo/payloads"
	"github.com/nexo-temporal/nexo/runs"
)

// fleet is a Temporal server (the embedded dev server in this process, or a real cluster
// from package internal/cluster) with worker processes, a fake model and a runs client:
// what bench chaos and bench scale drive.
type fleet struct {
	kind    string // embedded or cluster
	dir     string
	c       *cluster.Cluster
	dev     *devserver.Server
	model   *fakellm.Server
	modelTS *httptest.Server
	tc      client.Client
	runs    *runs.Client
	store   artifacts.Store
}

// buildNexo builds the worker and starter binaries into dir.
func buildNexo(ctx context.Context, dir string) (worker, starter string, err error) {
	worker, starter = filepath.Join(dir, "worker"), filepath.Join(dir, "starter")
	for _, b := range []struct{ out, pkg string }{{worker, "./worker"}, {starter, "./starter"}} {
		out, err := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg).CombinedOutput()
		if err != nil {
			return "", "", fmt.Errorf("build %s (run the bench from the repository root): %w\n%s", b.pkg, err, out)
		}
	}
	return worker, starter, nil
}

// startFleet starts the server of kind, workers worker processes configured with config
// (its llm.base_url is the fake model's, written in place of {{model}}).
func startFleet(ctx context.Context, kind string, workers int, script []fakellm.Reply, config string) (_ *fleet, err error) {
	if kind != "embedded" && kind != "cluster" {
		return nil, fmt.Errorf("--server %q: want embedded or cluster", kind)
	}
	dir, err := os.MkdirTemp("", "nexo-bench-"+kind+"-")
	if err != nil {
		return nil, err
	}
	f := &fleet{kind: kind, dir: dir}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	progress("building the worker and starter")
	worker, starter, err := buildNexo(ctx, dir)
	if err != nil {
		return nil, err
	}
	f.model = fakellm.New(script...)
	f.model.SizesOnly = true
	f.modelTS = httptest.NewServer(f.model)
	config = strings.ReplaceAll(config, "{{model}}", f.modelTS.URL+"/v1")
	opts := cluster.Options{Dir: dir, WorkerBin: worker, StarterBin: starter, Workers: workers, WorkerConfig: config}
	if kind == "embedded" {
		progress("starting the embedded dev server")
		f.dev, err = devserver.Start(ctx, devserver.Options{DBPath: filepath.Join(dir, "temporal.db")})
		if err != nil {
			return nil, err
		}
		opts.ExternalFrontend = f.dev.FrontendAddress()
	} else {
		progress("starting the cluster (PostgreSQL, temporal-server; the first run builds the server)")
	}
	if f.c, err = cluster.Start(ctx, opts); err != nil {
		return nil, err
	}
	co, err := f.c.ClientOptions()
	if err != nil {
		return nil, err
	}
	if f.store, err = artifacts.Open(f.c.ArtifactsDir()); err != nil {
		return nil, err
	}
	co.ExternalStorage = payloads.ExternalStorage(f.store, 0)
	co.Logger = quietSDKLogger()
	if f.tc, err = client.Dial(co); err != nil {
		return nil, err
	}
	f.runs = runs.New(f.tc, f.c.Namespace(), "nexo")
	f.runs.Blobs = f.store
	return f, nil
}

func (f *fleet) stop() {
	if f.tc != nil {
		f.tc.Close()
	}
	if f.c != nil {
		f.c.Stop()
	}
	if f.dev != nil {
		_ = f.dev.Stop()
	}
	if f.store != nil {
		_ = f.store.Close()
	}
	if f.modelTS != nil {
		f.modelTS.Close()
	}
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}

// startAgent starts an AgentRun of agent with prompt.
func (f *fleet) startAgent(ctx context.Context, agent, prompt string) (string, error) {
	in, _ := json.Marshal(api.AgentRunInput{Agent: agent, Prompt: prompt})
	return f.runs.Start(ctx, runs.StartRequest{Workflow: api.WorkflowAgentRun, Payload: in})
}

// closed reports whether run id's status is final.
func closed(s api.Status) bool {
	switch s {
	case api.StatusDone, api.StatusFailed, api.StatusInterrupted, api.StatusCanceled:
		return true
	}
	return false
}

// waitClosed polls run id until it closes or ctx ends; it returns the last record read.
func (f *fleet) waitClosed(ctx context.Context, id string) (api.Record, error) {
	var rec api.Record
	var err error
	for {
		rec, err = f.runs.Get(ctx, id)
		if err == nil && closed(rec.Status) {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("still " + string(rec.Status))
			}
			return rec, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}
