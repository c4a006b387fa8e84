// Package platform is the Nexo worker as a library: from a config it builds everything the
// shipped `worker` binary runs (the shipped workflows and activities, agents, MCP pool,
// sandboxes and their reaper, the worker registry announcements, the gateway and the
// embedded dev server under --dev) and adds a user's own workflows and activities to it.
//
// A user's worker is a few lines:
//
//	func main() {
//		platform.Main(
//			dev.Server(), // --dev: the embedded Temporal server (package platform/dev)
//			platform.Workflow("RefundRequest", RefundRequest),
//			platform.Activity(LookupOrder),
//		)
//	}
//
// Main parses flags, config file and environment exactly as the shipped worker does. New
// and Run are the same without the command line.
//
// This package never links the Temporal server: only platform/dev does, so a binary that
// does not offer --dev stays small.
package platform

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/skills"
	"github.com/nexo-temporal/nexo/workflows"
)

// Option adds to or configures a Platform.
type Option func(*options)

type options struct {
	workflows  []func(workflows.Registry)
	activities []registeredActivity
	startDev   StartDevServer
	stdout     io.Writer
	stderr     io.Writer
	lookupEnv  func(string) (string, bool)
	errs       []error
	// sandboxHost and pool: SandboxHost, Pool.
	sandboxHost bool
	pool        string
	toolHooks   activities.ToolHooks
	loops       activities.Loops
}

// A tool hook and what it sees (package activities documents them): Hook.Before may
// allow, deny or rewrite a call's arguments, Hook.After rewrite its result.
type (
	Hook         = activities.ToolHook
	HookCall     = activities.ToolCall
	HookDecision = activities.ToolDecision
	HookOutput   = activities.ToolOutput
)

// ToolHook registers h as the tool hook name: the tool calls, built-in and MCP, of every
// agent whose tool_hooks names it run through it, in the order the agent lists them
// (Nexo's wrap_mcp_tool). Hooks run inside the tool activities on the worker that runs
// the call, so every worker that runs tools (sandbox hosts and pool hosts too) must
// register the same hooks: New refuses an agent naming a hook this worker does not
// register, and a call reaching a worker without it fails with a tool error naming it.
func ToolHook(name string, h Hook) Option {
	return func(o *options) {
		switch {
		case strings.TrimSpace(name) == "":
			o.errs = append(o.errs, errors.New("platform.ToolHook: the hook name is empty"))
			return
		case h.Before == nil && h.After == nil:
			o.errs = append(o.errs, fmt.Errorf("platform.ToolHook %s: neither Before nor After is set", name))
			return
		}
		if _, dup := o.toolHooks[name]; dup {
			o.errs = append(o.errs, fmt.Errorf("platform.ToolHook %s: registered twice", name))
			return
		}
		if o.toolHooks == nil {
			o.toolHooks = activities.ToolHooks{}
		}
		o.toolHooks[name] = h
	}
}

// A pluggable agent loop written in Go and what one step of it sees and answers
// (package api documents the shapes, docs/harness-protocol.md the protocol they mirror).
type (
	Loop        = activities.Loop
	LoopFunc    = activities.LoopFunc
	LoopRequest = api.LoopRequest
	LoopStep    = api.LoopStep
)

// WithLoop registers l as the Go loop name: every agent with `loop: {type: go, name:
// name}` runs each turn as a step of l in place of a model call, through the same
// permission gate, approvals, budgets and events as the built-in loop. A step runs on
// the worker that hosts the run's sandbox, so every worker that hosts sandboxes (sandbox
// hosts and pool hosts too) must register the same loops: New refuses an agent naming a
// loop this worker does not register.
func WithLoop(name string, l Loop) Option {
	return func(o *options) {
		switch {
		case strings.TrimSpace(name) == "":
			o.errs = append(o.errs, errors.New("platform.WithLoop: the loop name is empty"))
			return
		case l == nil:
			o.errs = append(o.errs, fmt.Errorf("platform.WithLoop %s: the loop is nil", name))
			return
		}
		if _, dup := o.loops[name]; dup {
			o.errs = append(o.errs, fmt.Errorf("platform.WithLoop %s: registered twice", name))
			return
		}
		if o.loops == nil {
			o.loops = activities.Loops{}
		}
		o.loops[name] = l
	}
}

type registeredActivity struct {
	a    any
	opts activity.RegisterOptions
}

// Workflow registers fn as the workflow type name through workflows.Register, so its runs
// get the run record, the nexo.* signals and query, and the NexoStatus search attribute,
// like the shipped workflows. opts (at most one) configure its runs, such as their sandbox.
func Workflow[In, Out any](name string, fn func(ctx workflow.Context, in In) (Out, error), opts ...workflows.Options) Option {
	return func(o *options) {
		if strings.TrimSpace(name) == "" {
			o.errs = append(o.errs, errors.New("platform.Workflow: the workflow type name is empty"))
			return
		}
		if len(opts) > 1 {
			o.errs = append(o.errs, fmt.Errorf("platform.Workflow %s: %d workflows.Options given, want at most one", name, len(opts)))
			return
		}
		var wo workflows.Options
		if len(opts) == 1 {
			wo = opts[0]
		}
		o.workflows = append(o.workflows, func(r workflows.Registry) { workflows.Register(r, name, fn, wo) })
	}
}

// Workflows registers the workflows register registers, a package's own register function
// such as demo.Register (examples/demo, the Quickstart's DocumentApproval and
// BuildDashboard, which the shipped worker adds this way). The function decides how each is
// registered (workflows.Register for runs with a record); their activities come with
// Activity.
func Workflows(register func(workflows.Registry)) Option {
	return func(o *options) {
		if register == nil {
			o.errs = append(o.errs, errors.New("platform.Workflows: nil register function"))
			return
		}
		o.workflows = append(o.workflows, register)
	}
}

// Activity registers a user's activity next to the shipped ones: a function (type name:
// opts' Name, else the function's name, as the SDK does) or a struct pointer, whose
// exported methods are each an activity (opts' Name, if any, prefixes their names). Every
// one is kept alive by heartbeats while it runs, as the shipped activities are: the run
// runtime gives activities a heartbeat timeout (workflows.DefaultActivityOptions).
func Activity(a any, opts ...activity.RegisterOptions) Option {
	return func(o *options) {
		if len(opts) > 1 {
			o.errs = append(o.errs, fmt.Errorf("platform.Activity: %d activity.RegisterOptions given, want at most one", len(opts)))
			return
		}
		var ro activity.RegisterOptions
		if len(opts) == 1 {
			ro = opts[0]
		}
		switch k := reflect.TypeOf(a); {
		case a == nil:
			o.errs = append(o.errs, errors.New("platform.Activity: nil activity"))
			return
		case k.Kind() != reflect.Func && !(k.Kind() == reflect.Pointer && k.Elem().Kind() == reflect.Struct) && k.Kind() != reflect.Struct:
			o.errs = append(o.errs, fmt.Errorf("platform.Activity: %T is neither a function nor a struct", a))
			return
		}
		o.activities = append(o.activities, registeredActivity{a: a, opts: ro})
	}
}

// Output sets where the platform prints what it started (stdout) and its logs (stderr).
// Default os.Stdout and os.Stderr.
func Output(stdout, stderr io.Writer) Option {
	return func(o *options) { o.stdout, o.stderr = stdout, stderr }
}

// LookupEnv sets where the platform reads the secrets the config names by environment
// variable (API keys, MCP tokens, gateway tokens). Default os.LookupEnv; Main passes the
// secrets it took out of the environment (internal/secrets), so a sandboxed command cannot
// read them from the worker's.
func LookupEnv(lookup func(string) (string, bool)) Option {
	return func(o *options) { o.lookupEnv = lookup }
}

// SandboxHost makes the platform a sandbox host (`worker --sandbox-host`): a process that
// only serves sandboxes. It dials out to Temporal and polls its own host queue with the
// sandbox activities alone (activities.RegisterSandbox), and with Pool the pool's claim
// queue; it runs no workflow, no model call and no MCP call, so its config needs no model,
// agents or secrets of theirs, and it listens on no port. Without Pool it claims no new
// runs: it serves the runs whose sandboxes it already holds (its host id is kept under
// sandbox.root), which drains a host taken out of its pool.
func SandboxHost() Option {
	return func(o *options) { o.sandboxHost = true }
}

// Pool makes this worker's host one of the sandbox hosts of pool: it also polls the pool's
// claim queue (api.PoolQueueName), so runs whose agents say `sandbox: {pool: NAME}` can
// claim it. A worker that also runs workflows keeps serving the runs of agents without a
// pool.
func Pool(name string) Option {
	return func(o *options) {
		if err := api.ValidatePoolName(name); err != nil {
			o.errs = append(o.errs, fmt.Errorf("platform.Pool: %w", err))
			return
		}
		o.pool = name
	}
}

// Platform is one worker assembled from config: the shipped workflows and activities plus
// the user's. Run starts it.
type Platform struct {
	cfg  config.Config
	opts options
}

// New checks the options and returns the platform, not started. cfg is a config as
// config.Load returns it (validated). New reads the skills the agents name, so a broken
// SKILL.md stops it here with the file named.
func New(cfg config.Config, opts ...Option) (*Platform, error) {
	p := &Platform{cfg: cfg, opts: options{stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv}}
	for _, o := range opts {
		o(&p.opts)
	}
	if err := errors.Join(p.opts.errs...); err != nil {
		return nil, err
	}
	if err := p.checkWorkflowNames(); err != nil {
		return nil, err
	}
	if err := cfg.CheckReceiverURLs(p.opts.lookupEnv); err != nil {
		return nil, err
	}
	if err := checkSkills(cfg); err != nil {
		return nil, err
	}
	if err := checkToolHooks(cfg, p.opts.toolHooks); err != nil {
		return nil, err
	}
	if err := checkLoops(cfg, p.opts.loops); err != nil {
		return nil, err
	}
	return p, nil
}

// checkLoops refuses an agent naming a Go loop no WithLoop option registers, so the
// worker stops at start with the agent named, not at the agent's first turn.
func checkLoops(cfg config.Config, loops activities.Loops) error {
	var errs []error
	for _, a := range cfg.Agents {
		if a.Loop == nil || a.Loop.Type != api.LoopGo {
			continue
		}
		if _, ok := loops[a.Loop.Name]; ok {
			continue
		}
		known := strings.Join(loops.Names(), ", ")
		if known == "" {
			known = "none"
		}
		errs = append(errs, fmt.Errorf("agents[%s].loop.name: no Go loop %q is registered on this worker (registered: %s); a worker built on package platform registers it with platform.WithLoop(%q, ...)", a.Name, a.Loop.Name, known, a.Loop.Name))
	}
	return errors.Join(errs...)
}

// checkToolHooks refuses an agent naming a tool hook no ToolHook option registers, so
// the worker stops at start with the agent named, not at the agent's first tool call.
func checkToolHooks(cfg config.Config, hooks activities.ToolHooks) error {
	var errs []error
	for _, a := range cfg.Agents {
		for i, name := range a.ToolHooks {
			if _, ok := hooks[name]; ok {
				continue
			}
			known := strings.Join(hooks.Names(), ", ")
			if known == "" {
				known = "none"
			}
			errs = append(errs, fmt.Errorf("agents[%s].tool_hooks[%d]: no tool hook %q is registered on this worker (registered: %s); a worker built on package platform registers it with platform.ToolHook(%q, ...)", a.Name, i, name, known, name))
		}
	}
	return errors.Join(errs...)
}

// RegisterWorkflows registers the platform's workflows (workflows.RegisterAll: AgentRun,
// Session, the registry, the token limiter) and those the options add on r: a worker, or a
// worker.WorkflowReplayer, so a replay check sees exactly the workflows this platform runs.
func (p *Platform) RegisterWorkflows(r workflows.Registry) {
	workflows.RegisterAll(r)
	for _, reg := range p.opts.workflows {
		reg(r)
	}
}

// checkWorkflowNames refuses a user's workflow named like a shipped one or like another,
// which the SDK would only report by a panic when the worker registers them.
func (p *Platform) checkWorkflowNames() error {
	names := &nameRecorder{seen: map[string]int{}}
	p.RegisterWorkflows(names)
	var errs []error
	for _, n := range names.order {
		if c := names.seen[n]; c > 1 {
			errs = append(errs, fmt.Errorf("workflow type %s is registered %d times (the platform registers AgentRun, Session, %s, %s and %s, the options the rest; choose another name)", n, c, api.WorkflowRegistry, api.WorkflowTokenLimiter, api.WorkflowNotifier))
		}
	}
	return errors.Join(errs...)
}

// nameRecorder is a workflows.Registry that only counts the names registered on it.
type nameRecorder struct {
	seen  map[string]int
	order []string
}

func (n *nameRecorder) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	if n.seen[o.Name] == 0 {
		n.order = append(n.order, o.Name)
	}
	n.seen[o.Name]++
}

// keepAlive is the interceptor list of every worker the platform starts: each activity
// attempt with a heartbeat timeout heartbeats while it runs (activities.KeepAlive), the
// shipped activities and the user's alike.
func keepAlive() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&activities.KeepAlive{}}
}

// registerActivities registers the user's activities on r (kept alive by the worker's
// keepAlive interceptor) and turns the SDK's panic on a bad or duplicate one into an
// error naming it.
func (p *Platform) registerActivities(r activities.Registry) (err error) {
	for _, ra := range p.opts.activities {
		v := reflect.ValueOf(ra.a)
		if v.Kind() == reflect.Func {
			if err := registerActivity(r, ra.a, ra.opts); err != nil {
				return err
			}
			continue
		}
		// A struct: each exported method on its own, so a bad or duplicate one is an
		// error naming it.
		t := v.Type()
		n := 0
		for i := range t.NumMethod() {
			m := t.Method(i)
			if !m.IsExported() {
				continue
			}
			mo := ra.opts
			mo.Name = ra.opts.Name + m.Name
			if err := registerActivity(r, v.Method(i).Interface(), mo); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("register activities of %s: it has no exported methods (is a method on the pointer, and a value given?)", t)
		}
	}
	return nil
}

func registerActivity(r activities.Registry, fn any, o activity.RegisterOptions) (err error) {
	defer func() {
		if v := recover(); v != nil {
			name := o.Name
			if name == "" {
				name = fmt.Sprintf("%T", fn)
			}
			err = fmt.Errorf("register activity %s: %v", name, v)
		}
	}()
	r.RegisterActivityWithOptions(fn, o)
	return nil
}

// checkSkills loads every skill an agent names, so a missing skill or a broken SKILL.md
// stops the worker at start with the file named, not a run later.
func checkSkills(cfg config.Config) error {
	var errs []error
	for _, a := range cfg.Agents {
		for i, name := range a.Skills {
			_, err := skills.Load(cfg.SkillsPath, name)
			parts := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				parts = j.Unwrap() // one line per problem of a SKILL.md, each with the agent
			}
			for _, e := range parts {
				if e != nil {
					errs = append(errs, fmt.Errorf("agents[%s].skills[%d]: %w", a.Name, i, e))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// logger is the platform's logger, as the config sets it, on stderr.
func (p *Platform) logger() *slog.Logger { return p.cfg.NewLogger(p.opts.stderr) }

// getenv is os.Getenv over the platform's secrets.
func (p *Platform) getenv(name string) string {
	v, _ := p.opts.lookupEnv(name)
	return v
}
