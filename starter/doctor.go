package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
	"github.com/nexo-temporal/nexo/runs"
	"github.com/nexo-temporal/nexo/sandbox/bwrap"
	"github.com/nexo-temporal/nexo/sandbox/docker"
)

// checkResult is one line of `starter doctor`: what was checked, whether it is fine, and
// when it is not, what to do.
type checkResult struct {
	Check string `json:"check"`
	// Status is "ok", "FAIL" or "skip" (not checked: what it needs failed before).
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func ok(check, format string, a ...any) checkResult {
	return checkResult{Check: check, Status: "ok", Detail: fmt.Sprintf(format, a...)}
}

func fail(check, fix, format string, a ...any) checkResult {
	return checkResult{Check: check, Status: "FAIL", Detail: fmt.Sprintf(format, a...), Fix: fix}
}

func skip(check, why string) checkResult {
	return checkResult{Check: check, Status: "skip", Detail: why}
}

// doctorCheck is one check of `starter doctor`: it returns one result per thing it looked
// at (one per model endpoint, one per port). doctorChecks runs them in order; a room that
// has something to check appends its own (undelivered notifications, for one), reading
// what the earlier checks found from the doctor.
type doctorCheck struct {
	name string
	run  func(ctx context.Context, d *doctor) []checkResult
}

// doctorChecks are the checks `starter doctor` runs, in this order.
var doctorChecks = []doctorCheck{
	{"temporal", checkTemporal},
	{"workers", checkWorkers},
	{"store", checkStores},
	{"models", checkModels},
	{"sandboxes", checkSandboxes},
	{"ports", checkPorts},
	{"notifications", checkNotifications},
}

// doctor is what the checks share: the config (loaded and valid before any check runs),
// and what the earlier checks learned.
type doctor struct {
	e   *env
	cfg config.Config
	// rc is the client once Temporal answered (nil before, or when it did not).
	rc *runs.Client
	// view is the registry's live workers once the workers check read them (nil: unknown).
	view *api.RegistryView
	// temporalAddr is the address Temporal answered on ("" when it did not).
	temporalAddr string
}

// doctorTimeout bounds each network probe: a doctor never hangs on one.
const doctorTimeout = 5 * time.Second

func doctorCmd() *command {
	return &command{
		name: "doctor", args: "", summary: "Check in one go what a run needs: config, Temporal, live workers and what they offer, one artifact store, model endpoints, Docker/bubblewrap, ports, undelivered notifications; exit 1 naming the fixes.",
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("json", false, `print {"ok": bool, "checks": [{check, status, detail, fix}]}`)
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if err := needArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			results := runDoctor(ctx, e)
			failed := []string{}
			for _, r := range results {
				if r.Status == "FAIL" {
					failed = append(failed, r.Check)
				}
			}
			if asJSON, _ := fs.GetBool("json"); asJSON {
				if err := e.printJSON(map[string]any{"ok": len(failed) == 0, "checks": results}); err != nil {
					return err
				}
			} else {
				printDoctor(e.stdout, results)
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d check(s) failed: %s (each FAIL line says the fix)", len(failed), strings.Join(slices.Compact(failed), ", "))
			}
			return nil
		},
	}
}

// runDoctor runs the config check, then every doctorChecks entry.
func runDoctor(ctx context.Context, e *env) []checkResult {
	cfg, err := e.config()
	if err != nil {
		return []checkResult{fail("config", "fix the field it names in the config file (or its NEXO_* variable or flag)", "%v", err)}
	}
	file := "no config file (defaults and NEXO_* variables)"
	if f := e.fs.Lookup(config.FlagConfig); f != nil && f.Value.String() != "" {
		file = f.Value.String()
	} else if f := os.Getenv("NEXO_CONFIG"); f != "" {
		file = f
	} else if _, err := os.Stat(config.DefaultFile); err == nil {
		file = config.DefaultFile
	}
	res := ok("config", "%s: valid", file)
	if w := cfg.Warnings(); len(w) > 0 {
		res.Detail += fmt.Sprintf("; %d warning(s): %s", len(w), strings.Join(w, "; "))
	}
	results := []checkResult{res}
	d := &doctor{e: e, cfg: cfg}
	for _, c := range doctorChecks {
		results = append(results, c.run(ctx, d)...)
	}
	return results
}

func printDoctor(w io.Writer, results []checkResult) {
	for _, r := range results {
		fmt.Fprintf(w, "%-4s  %s: %s\n", r.Status, r.Check, r.Detail)
		if r.Fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", r.Fix)
		}
	}
}

// addressSource names where temporal.address came from: the flag, the environment
// variable, the config file or the default.
func (d *doctor) addressSource() string {
	if !d.cfg.Temporal.Given("temporal.address") {
		return "the default temporal.address, or a Temporal client profile"
	}
	if d.cfg.FromPortBase("temporal.address") {
		if _, set := os.LookupEnv(config.PortBaseEnv); set {
			return "env " + config.PortBaseEnv
		}
		return "config " + config.PortBaseKey
	}
	return d.cfg.Temporal.Source("temporal.address")
}

func checkTemporal(ctx context.Context, d *doctor) []checkResult {
	from := d.addressSource()
	start := time.Now()
	rc, err := d.e.runs(ctx)
	if err != nil {
		return []checkResult{fail("temporal",
			"start one (bin/worker --dev), or point temporal.address at yours (--address, NEXO_TEMPORAL_ADDRESS or the config file)",
			"%s (from %s) did not answer: %v", d.cfg.Temporal.Address, from, err)}
	}
	d.rc = rc
	d.temporalAddr = d.e.cfg.Temporal.Address
	return []checkResult{ok("temporal", "%s (from %s), namespace %s, answered in %s", d.temporalAddr, from,
		d.e.cfg.Temporal.Namespace, time.Since(start).Round(time.Millisecond))}
}

func checkWorkers(ctx context.Context, d *doctor) []checkResult {
	if d.rc == nil {
		return []checkResult{skip("workers", "Temporal did not answer")}
	}
	tq := d.cfg.Temporal.TaskQueue
	fix := fmt.Sprintf("start a worker on task queue %s (bin/worker --dev, or bin/worker --config nexo.yaml against this server)", tq)
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	v, err := d.rc.Workflows(cctx)
	if err != nil {
		return []checkResult{fail("workers", fix, "%v", err)}
	}
	d.view = &v
	if len(v.Workers) == 0 {
		return []checkResult{fail("workers", fix, "no live worker on task queue %s (none announced itself within its TTL)", tq)}
	}
	var polling []string
	if resp, err := d.e.tc.DescribeTaskQueue(cctx, tq, enumspb.TASK_QUEUE_TYPE_WORKFLOW); err == nil {
		for _, p := range resp.GetPollers() {
			polling = append(polling, p.GetIdentity())
		}
	}
	parts := make([]string, 0, len(v.Workers))
	for _, w := range v.Workers {
		s := fmt.Sprintf("%s (agents %s; %d workflow types", w.Identity, orNone(strings.Join(w.Agents, ", ")), len(w.Workflows))
		if polling != nil && !slices.Contains(polling, w.Identity) {
			s += "; not polling yet"
		}
		parts = append(parts, s+")")
	}
	return []checkResult{ok("workers", "%d live on task queue %s: %s; agents offered: %s", len(v.Workers), tq,
		strings.Join(parts, ", "), orNone(strings.Join(v.Agents, ", ")))}
}

// checkStores fails when the live workers name different artifact stores (or the same
// file:// path on different machines), or when this starter's artifacts.url is not
// theirs: a run that moves between those workers cannot restore what another stored.
func checkStores(_ context.Context, d *doctor) []checkResult {
	if d.view == nil || len(d.view.Workers) == 0 {
		return []checkResult{skip("store", "no live worker to compare with")}
	}
	type group struct {
		store   api.StoreAnnouncement
		workers []string
	}
	var groups []group
	for _, w := range d.view.Workers {
		if w.Store == nil {
			continue
		}
		i := slices.IndexFunc(groups, func(g group) bool { return g.store.SameAs(*w.Store) })
		if i < 0 {
			groups = append(groups, group{store: *w.Store})
			i = len(groups) - 1
		}
		groups[i].workers = append(groups[i].workers, w.Identity)
	}
	if len(groups) == 0 {
		return []checkResult{skip("store", "no live worker announced its store (workers older than the store announcement)")}
	}
	fix := "give every worker the same artifacts.url: one shared directory (an absolute path every host mounts) or a bucket (s3://, gs://, azblob://)"
	if len(groups) > 1 {
		parts := make([]string, len(groups))
		for i, g := range groups {
			parts[i] = fmt.Sprintf("%s (%s)", g.store.Label(), strings.Join(g.workers, ", "))
		}
		return []checkResult{fail("store", fix, "the live workers use %d artifact stores: %s; runs that move between these hosts cannot restore their workspaces",
			len(groups), strings.Join(parts, "; "))}
	}
	mine, err := runs.DescribeStore(d.cfg.Artifacts.URL, "starter")
	if err == nil && mine.Scheme != "mem" && !mine.SameAs(groups[0].store) {
		return []checkResult{fail("store", "give this starter the workers' artifacts.url (NEXO_ARTIFACTS_URL or the config file)",
			"this starter reads %s, the workers store to %s: it cannot read what they offloaded or stored (large inputs, records, artifacts)",
			mine.Label(), groups[0].store.Label())}
	}
	return []checkResult{ok("store", "every live worker uses %s", groups[0].store.Label())}
}

// checkModels asks every configured model endpoint for the cheapest answer it gives:
// GET /models (no tokens), and only when the endpoint has none, a 1-token completion.
func checkModels(ctx context.Context, d *doctor) []checkResult {
	eps := d.cfg.Endpoints()
	if len(eps) == 0 {
		return []checkResult{ok("model", "no model endpoint configured (llm.base_url unset: no agent can run)")}
	}
	var out []checkResult
	for _, name := range slices.Sorted(maps.Keys(eps)) {
		out = append(out, probeEndpoint(ctx, d, name, eps[name]))
	}
	return out
}

func probeEndpoint(ctx context.Context, d *doctor, name string, ep config.Endpoint) checkResult {
	check := "model endpoint " + name
	key := ""
	keyNote := "no key"
	if ep.APIKeyEnv != "" {
		key = d.e.getenv(ep.APIKeyEnv)
		keyNote = "key from $" + ep.APIKeyEnv
		if key == "" {
			keyNote = "$" + ep.APIKeyEnv + " unset: no key sent"
		}
	}
	field := "llm.base_url"
	if name != api.DefaultEndpoint {
		field = "llm.endpoints." + name + ".base_url"
	}
	base := strings.TrimRight(ep.BaseURL, "/")
	model := ep.Model
	if model == "" {
		model = d.cfg.LLM.Model
	}
	pctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	start := time.Now()
	status, body, err := endpointRequest(pctx, http.MethodGet, base+"/models", key, nil)
	how := "GET /models"
	if err == nil && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented) {
		// No model list here: the smallest request that proves the endpoint answers.
		req, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 1,
			"messages": []map[string]string{{"role": "user", "content": "ping"}}})
		start = time.Now()
		status, body, err = endpointRequest(pctx, http.MethodPost, base+"/chat/completions", key, req)
		how = "a 1-token completion (it has no GET /models)"
	}
	latency := time.Since(start).Round(time.Millisecond)
	fix := fmt.Sprintf("check %s (now %s) and that the model server runs there", field, ep.BaseURL)
	switch {
	case err != nil:
		return fail(check, fix, "%s (%s): %s: %v", ep.BaseURL, keyNote, how, err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		keyFix := "set the endpoint's key in $" + ep.APIKeyEnv
		if ep.APIKeyEnv == "" {
			keyFix = "name the variable holding its key in " + strings.TrimSuffix(field, "base_url") + "api_key_env"
		}
		return fail(check, keyFix, "%s (%s): %s answered %d: %s", ep.BaseURL, keyNote, how, status, snippet(body))
	case status >= 300:
		return fail(check, fix, "%s (%s): %s answered %d: %s", ep.BaseURL, keyNote, how, status, snippet(body))
	}
	return ok(check, "%s (model %s, %s) answered %s in %s", ep.BaseURL, orNone(model), keyNote, how, latency)
}

// endpointRequest makes one request to a model endpoint, with the key when there is one,
// and reads at most 4 KiB of the answer.
func endpointRequest(ctx context.Context, method, url, key string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, b, nil
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// checkSandboxes checks, on this machine, the sandbox tiers the configured agents need:
// the Docker engine for type docker, bubblewrap for type bubblewrap.
func checkSandboxes(ctx context.Context, d *doctor) []checkResult {
	need := map[string][]string{}
	for _, a := range d.cfg.Agents {
		if t := a.Sandbox.Type; t == api.SandboxDocker || t == api.SandboxBubblewrap {
			need[t] = append(need[t], a.Name)
		}
	}
	if len(need) == 0 {
		return []checkResult{ok("sandboxes", "no agent needs Docker or bubblewrap")}
	}
	var out []checkResult
	if users := need[api.SandboxDocker]; users != nil {
		cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		cli, err := docker.NewClient(cctx)
		cancel()
		if err != nil {
			out = append(out, fail("docker", "start the Docker engine on the workers' hosts (or set DOCKER_HOST), or give these agents another sandbox.type",
				"agents %s need it: %v", strings.Join(users, ", "), err))
		} else {
			out = append(out, ok("docker", "the engine at %s answers (agents %s)", cli.DaemonHost(), strings.Join(users, ", ")))
			cli.Close()
		}
	}
	if users := need[api.SandboxBubblewrap]; users != nil {
		bin, err := bwrap.LookPath("")
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
			err = bwrap.Probe(cctx, bin)
			cancel()
		}
		if err != nil {
			out = append(out, fail("bubblewrap", "install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces, or give these agents another sandbox.type",
				"agents %s need it: %v", strings.Join(users, ", "), err))
		} else {
			out = append(out, ok("bubblewrap", "%s runs a sealed command (agents %s)", bin, strings.Join(users, ", ")))
		}
	}
	return out
}

// checkPorts checks that the ports `worker --dev` and `starter serve` bind are free, or
// held by the platform this doctor reached.
func checkPorts(ctx context.Context, d *doctor) []checkResult {
	dev := d.cfg.Dev
	type port struct {
		what, setting, env, addr string
		ours                     func() bool
	}
	frontend := net.JoinHostPort(dev.IP, strconv.Itoa(dev.FrontendPort))
	reachedDev := d.temporalAddr != "" && sameAddr(d.temporalAddr, frontend)
	ports := []port{{"Temporal frontend (worker --dev)", "dev.frontend_port", "NEXO_DEV_FRONTEND_PORT", frontend, func() bool { return reachedDev }}}
	if dev.UIPort != 0 {
		ports = append(ports, port{"Temporal Web UI (worker --dev)", "dev.ui_port", "NEXO_DEV_UI_PORT",
			net.JoinHostPort(dev.IP, strconv.Itoa(dev.UIPort)), func() bool { return reachedDev }})
	}
	gw := d.cfg.Gateway.Addr
	ports = append(ports, port{"gateway (worker --dev, starter serve)", "gateway.addr", "NEXO_GATEWAY_ADDR", gw,
		func() bool { return isGateway(ctx, gw) }})
	var out []checkResult
	for _, p := range ports {
		check := "port " + p.addr
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			ln.Close()
			out = append(out, ok(check, "%s: free", p.what))
			continue
		}
		if p.ours() {
			out = append(out, ok(check, "%s: in use by the running platform", p.what))
			continue
		}
		out = append(out, fail(check, fmt.Sprintf("stop what holds it, or move it: %s (%s), or %s to move all three", p.setting, p.env, config.PortBaseEnv),
			"%s: taken by another program: %v", p.what, errors.Unwrap(err)))
	}
	return out
}

// sameAddr reports whether two host:port name the same listener (loopback names alike).
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	loop := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}
	return ah == bh || loop(ah) && loop(bh)
}

// isGateway reports whether a Nexo gateway answers at addr (its OpenAPI document).
func isGateway(ctx context.Context, addr string) bool {
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	status, body, err := endpointRequest(cctx, http.MethodGet, "http://"+addr+"/v1/openapi.json", "", nil)
	return err == nil && (status == http.StatusUnauthorized || status == http.StatusOK && bytes.Contains(body, []byte(`"openapi"`)))
}

// checkNotifications fails when a receiver's outbox holds notifications it could not
// deliver: given up (failed), or pending after at least one refused attempt. A
// notification not yet tried, or none at all, is fine.
func checkNotifications(ctx context.Context, d *doctor) []checkResult {
	if d.rc == nil {
		return []checkResult{skip("notifications", "Temporal did not answer")}
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	sts, err := d.rc.Notifications(cctx)
	if err != nil {
		return []checkResult{fail("notifications", "see starter notifications", "%v", err)}
	}
	return notificationResults(sts)
}

// notificationResults is one result per receiver with undelivered notifications, or one
// ok line when there are none.
func notificationResults(sts []api.NotifierStatus) []checkResult {
	const fix = "make the receiver answer (its URL, its secret, its 2xx); starter notifications lists each one with its run and last error"
	var out []checkResult
	delivered := int64(0)
	for _, st := range sts {
		delivered += st.Delivered
		if st.Error != "" {
			out = append(out, fail("notifications", fix, "the outbox %s did not answer: %s", st.ID, st.Error))
			continue
		}
		var retrying []api.NotifyItem
		for _, it := range st.Pending {
			if it.LastError != "" {
				retrying = append(retrying, it)
			}
		}
		if len(st.Failed) == 0 && len(retrying) == 0 {
			continue
		}
		var parts []string
		if len(st.Failed) > 0 {
			last := st.Failed[len(st.Failed)-1]
			parts = append(parts, fmt.Sprintf("%d given up (last: run %s %s after %d attempts: %s)", len(st.Failed), last.RunID, last.Event, last.Attempts, last.LastError))
		}
		if len(retrying) > 0 {
			first := retrying[0]
			parts = append(parts, fmt.Sprintf("%d retrying (oldest: run %s %s since %s, attempt %d: %s)", len(retrying), first.RunID, first.Event,
				first.At.UTC().Format(time.RFC3339), first.Attempts, first.LastError))
		}
		out = append(out, fail("notifications", fix, "receiver %s: %s", st.Receiver, strings.Join(parts, "; ")))
	}
	if len(out) == 0 {
		return []checkResult{ok("notifications", "none undelivered (%d receiver(s), %d delivered)", len(sts), delivered)}
	}
	return out
}
