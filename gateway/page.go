package gateway

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/runs"
)

// The web page: server-rendered html/template pages (which escape everything they are
// given) plus static/app.js for the live stream and the decision buttons. The page sends
// a strict Content-Security-Policy: scripts and styles from the gateway only, no inline
// script, so even a template mistake could not run a model's markup.

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageTemplates holds one template set per page, each with the shared layout.
type pageTemplates map[string]*template.Template

var pageFuncs = template.FuncMap{
	"pretty":      prettyJSON,
	"compact":     compactJSON,
	"ts":          func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"clock":       func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"iso":         func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"pathEscape":  url.PathEscape,
	"queryEscape": url.QueryEscape,
	"size":        humanSize,
	"short":       func(s string, n int) string { return shorten(s, n) },
	"closed":      func(s api.Status) bool { return s.Closed() },
	"present":     func(raw json.RawMessage) bool { return compactJSON(raw) != "" },
	"cost":        api.FormatCost,
}

func parseTemplates() (pageTemplates, error) {
	pages := pageTemplates{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(pageFuncs).ParseFS(templateFS, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("parse page template %s: %w", base, err)
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

// pageData is what the layout renders around a page's body.
type pageData struct {
	Title string
	// User is the token the browser is logged in with ("" on an open gateway).
	User string
	Open bool
	CSRF string
	Body any
}

// render writes a page; rendering into a buffer first turns a template error into a
// clean 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page, title string, body any) {
	d := pageData{Title: title, Open: s.Open(), Body: body}
	if p := principalFrom(r.Context()); p != nil && !p.open {
		d.User = p.name
		if p.session != nil {
			d.CSRF = p.session.csrf
		}
	}
	var buf bytes.Buffer
	t, ok := s.pageTemplate[page]
	if !ok {
		http.Error(w, "no page template "+page, http.StatusInternalServerError)
		return
	}
	if err := t.Execute(&buf, d); err != nil {
		s.logger.Error("render page", "page", page, "error", err)
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// pageError renders an error page.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, status int, detail string) {
	s.render(w, r, status, "error", http.StatusText(status), struct {
		Status int
		Title  string
		Detail string
	}{status, http.StatusText(status), detail})
}

// runsView is the body of the runs list.
type runsView struct {
	// Chips are the status filter's links, each keeping the search.
	Chips    []statusChip
	Status   string
	Workflow string
	// Search is the search box's term (?q=): an id prefix, a workflow type or an agent.
	Search string
	Runs   []runs.Summary
	// Next links the next page, if any (built from url.Values, so safe as a URL).
	Next  template.URL
	Error string
}

// statusChip is one link of the status filter ("" is all).
type statusChip struct {
	Status string
	URL    template.URL
	Active bool
}

// runsURL is the Runs page's link for these filters (from url.Values, so safe as a URL):
// the URL holds the whole view, so a link reproduces it.
func runsURL(q url.Values) template.URL {
	if e := q.Encode(); e != "" {
		return template.URL("/?" + e)
	}
	return "/"
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := runsView{Status: q.Get("status"), Workflow: q.Get("workflow"), Search: q.Get("q")}
	for _, st := range append([]api.Status{""}, api.Statuses...) {
		cq := url.Values{}
		for _, k := range []string{"q", "workflow", "limit"} {
			if q.Get(k) != "" {
				cq.Set(k, q.Get(k))
			}
		}
		if st != "" {
			cq.Set("status", string(st))
		}
		v.Chips = append(v.Chips, statusChip{Status: string(st), URL: runsURL(cq), Active: string(st) == v.Status})
	}
	req, err := listRequest(q)
	status := http.StatusOK
	if err == nil {
		var next []byte
		v.Runs, next, err = s.runsFor(r.Context()).List(r.Context(), req)
		if len(next) > 0 {
			q.Set("page_token", encodePageToken(next)) // q is this request's own copy
			v.Next = runsURL(q)
		}
	}
	if err != nil {
		v.Error, status = err.Error(), statusOf(err)
	}
	s.render(w, r, status, "runs", "Runs", v)
}

// checkpoint is one state entry shown on the run page.
type checkpoint struct{ Name, Value string }

// runView is the body of the run page.
type runView struct {
	Rec          api.Record
	StatusDetail string
	Pending      *Pending
	// PendingArgs is the call's arguments as indented JSON.
	PendingArgs string
	// PendingFields are the arguments one by one, in their order, strings as text (a file's
	// content reads as the file, not as one JSON line of \n escapes).
	PendingFields []argField
	Checkpoints   []checkpoint
	LastSeq       int64
	CanApprove    bool
	CanOperate    bool
	Rerunnable    bool
	// TemporalURL is the run's page in the Temporal Web UI; "" when none is configured.
	TemporalURL string
	// Budget is set when the pending decision is a budget pause: the page shows its
	// figures and a raise form instead of the tool call's.
	Budget *budgetView
	// Calls are the run's tool calls, each with its workspace links (when the run has
	// snapshots) and, on an agent run, a "fork from here" form (CanFork).
	Calls   []callView
	CanFork bool
	// Retrying says what each retried activity of the run waits on (runs.RetryLine), as
	// of the page's rendering; the live stream's retrying events keep it current.
	Retrying []string
	// Usage is what the run's model calls spent, nil when it made none.
	Usage *usageView
	// Parent is the run that delegated this one (an agent_<name> call), nil for a top
	// run; Delegates the child runs this one started, in order (runs.Delegation). The
	// page links both ways.
	Parent    *api.ParentLink
	Delegates []runs.DelegateLink
}

// usageView is the run page's usage box: the totals, one row per model, and the budget
// the run met, if any.
type usageView struct {
	Total  api.UsageSum
	Models []usageRow
	// Budgets are the bounds the run's budget pauses named (raises included), one per
	// agent and scope, in the order they were first met. An agent whose budget was
	// never reached shows none: its bounds are the worker's, not the run's.
	Budgets []budgetLine
}

type usageRow struct {
	Name string
	api.UsageSum
}

// budgetLine is one budget bound as the run's last pause or raise of it said.
type budgetLine struct {
	Agent, Scope      string
	UsedTokens        int
	MaxTokens         int
	UsedCost, MaxCost float64
	Raised, Denied    bool
}

// usageOf builds the usage box of rec, nil for a run without model calls.
func usageOf(rec api.Record) *usageView {
	u := rec.Usage
	if u == nil || u.Calls == 0 {
		return nil
	}
	v := &usageView{Total: u.UsageSum}
	for _, name := range slices.Sorted(maps.Keys(u.ByModel)) {
		n := name
		if strings.TrimSpace(n) == "" {
			n = "(unnamed)"
		}
		v.Models = append(v.Models, usageRow{Name: n, UsageSum: u.ByModel[name]})
	}
	index := map[string]int{}
	for _, ev := range rec.Events {
		if ev.Type != api.EventBudgetExceeded && ev.Type != api.EventBudgetRaised && ev.Type != api.EventBudgetDenied {
			continue
		}
		var d struct {
			Agent      string  `json:"agent"`
			Scope      string  `json:"scope"`
			UsedTokens int     `json:"used_tokens"`
			MaxTokens  int     `json:"max_tokens"`
			UsedCost   float64 `json:"used_cost"`
			MaxCost    float64 `json:"max_cost"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		key := d.Agent + "\x00" + d.Scope
		i, ok := index[key]
		if !ok {
			if ev.Type != api.EventBudgetExceeded {
				continue
			}
			i = len(v.Budgets)
			index[key] = i
			v.Budgets = append(v.Budgets, budgetLine{Agent: d.Agent, Scope: d.Scope})
		}
		b := &v.Budgets[i]
		switch ev.Type {
		case api.EventBudgetExceeded:
			b.UsedTokens, b.MaxTokens, b.UsedCost, b.MaxCost = d.UsedTokens, d.MaxTokens, d.UsedCost, d.MaxCost
			b.Raised, b.Denied = false, false
		case api.EventBudgetRaised:
			if d.MaxTokens > 0 {
				b.MaxTokens = d.MaxTokens
			}
			if d.MaxCost > 0 {
				b.MaxCost = d.MaxCost
			}
			b.Raised = true
		case api.EventBudgetDenied:
			b.Denied = true
		}
	}
	return v
}

// callView is one tool call on the run page.
type callView struct {
	runs.ToolCall
	// ArgsText is the arguments on one line, shortened.
	ArgsText string
	// Files and Changes link the workspace as the call found it and what it changed
	// ("" when the run has no snapshots, or, for Changes, the call has not ended).
	Files, Changes string
	// Fork is the fork route the form posts to.
	Fork string
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	rec, err := s.runsFor(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	p := principalFrom(r.Context())
	v := runView{Rec: rec, StatusDetail: statusDetail(rec), Pending: pendingOf(rec),
		CanApprove: p.has(api.ScopeApprove), CanOperate: p.has(api.ScopeOperate)}
	switch rec.Status {
	case api.StatusFailed, api.StatusInterrupted, api.StatusCanceled:
		v.Rerunnable = rec.Warning == "" // its checkpoints are unknown: nothing to seed
	}
	for _, p := range rec.Retrying {
		v.Retrying = append(v.Retrying, runs.RetryLine(p, time.Now()))
	}
	v.Usage = usageOf(rec)
	v.Parent, v.Delegates = runs.Delegation(rec)
	if s.temporalUI != "" {
		// Without a run id the UI shows the workflow id's latest run, which is this run.
		v.TemporalURL = s.temporalUI + "/namespaces/" + url.PathEscape(s.namespace) + "/workflows/" + url.PathEscape(rec.ID)
	}
	if pend := v.Pending; pend != nil {
		v.Budget = budgetOf(pend.Capability, pend.Args, "/v1/runs/"+url.PathEscape(rec.ID)+"/approvals/"+url.PathEscape(pend.CallID), pend.ArgsSHA256)
	}
	if v.Pending != nil && len(v.Pending.Args) > 0 {
		v.PendingArgs = prettyJSON(v.Pending.Args)
		v.PendingFields = argFields(v.Pending.Args)
	}
	for _, k := range slices.Sorted(maps.Keys(rec.State)) {
		if !api.IsReservedStateKey(k) && (k != api.StateParent || v.Parent == nil) { // the parent is a link above
			v.Checkpoints = append(v.Checkpoints, checkpoint{Name: k, Value: prettyJSON(rec.State[k])})
		}
	}
	if n := len(rec.Events); n > 0 {
		v.LastSeq = rec.Events[n-1].Seq
	}
	// Files, changes and forks read snapshots from the blob store: a gateway without one
	// offers none of them rather than links to an error.
	_, store := s.store.(runs.WorkspaceStore)
	v.CanFork = store && rec.Workflow == api.WorkflowAgentRun && v.CanOperate
	snapshots := store && runs.HasSnapshots(rec.Events)
	for _, c := range runs.ToolCalls(rec.Events) {
		cv := callView{ToolCall: c, ArgsText: shorten(compactJSON(c.Args), 120), Fork: runPath(rec.ID) + "/fork"}
		if snapshots {
			cv.Files = workspaceFilesPath(rec.ID, c.ID)
			if c.Ended {
				cv.Changes = callChangesPath(rec.ID, c.ID)
			}
		}
		v.Calls = append(v.Calls, cv)
	}
	s.render(w, r, http.StatusOK, "run", "Run "+shorten(rec.ID, 13), v)
}

// sessionsView is the body of the sessions list.
type sessionsView struct {
	Sessions []runs.SessionSummary
	// Agent and Instance refill the "open a session" form after a bad entry.
	Agent, Instance string
	Error           string
}

// sessionsPage lists sessions; its form (?agent=&instance=) opens one, new or not.
func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := sessionsView{Agent: q.Get("agent"), Instance: q.Get("instance")}
	status := http.StatusOK
	if q.Has("agent") || q.Has("instance") {
		err := checkAgentName(v.Agent)
		if err == nil {
			if ierr := api.ValidateInstance(v.Instance); ierr != nil {
				err = badInput("%v", ierr)
			}
		}
		if err == nil {
			http.Redirect(w, r, sessionPagePath(v.Agent, v.Instance), http.StatusSeeOther)
			return
		}
		v.Error, status = err.Error(), statusOf(err)
	}
	limit, err := listLimit(q)
	if err == nil {
		v.Sessions, err = s.runsFor(r.Context()).ListSessions(r.Context(), limit)
	}
	if err != nil && v.Error == "" {
		v.Error, status = err.Error(), statusOf(err)
	}
	s.render(w, r, status, "sessions", "Sessions", v)
}

// sessionNew is the status the session page shows for a session its first prompt creates.
const sessionNew api.Status = "new"

func sessionPagePath(agent, instance string) string {
	return "/sessions/" + url.PathEscape(agent) + "/" + url.PathEscape(instance)
}

// sessionView is the body of the session page.
type sessionView struct {
	ID, Agent, Instance string
	// Status is the session's, or "new" when it does not exist yet (its first prompt
	// creates it).
	Status api.Status
	Turns  []api.SessionTurn
	Runs   int
	// Pending is the tool call the session waits for, if any.
	Pending *Pending
	// Budget is set instead of Pending when the session waits on a budget pause: the page
	// shows its figures and a raise form, as the run page does. BudgetCall is its call id.
	Budget     *budgetView
	BudgetCall string
	// After is where the live stream starts: the end of the last finished turn, so a turn
	// in progress is shown from its beginning.
	After      int64
	CanOperate bool
	CanApprove bool
}

// sessionPage shows a session's turns, a prompt box and (through app.js) its live
// activity stream. A session that does not exist yet is shown empty: the prompt box
// creates it.
func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) {
	agent, instance, err := sessionAddress(r)
	if err != nil {
		s.pageError(w, r, statusOf(err), err.Error())
		return
	}
	p := principalFrom(r.Context())
	v := sessionView{ID: api.SessionID(agent, instance), Agent: agent, Instance: instance, Status: sessionNew,
		CanOperate: p.has(api.ScopeOperate), CanApprove: p.has(api.ScopeApprove)}
	view, err := s.runsFor(r.Context()).Session(r.Context(), agent, instance)
	var nf *runs.NotFoundError
	switch {
	case errors.As(err, &nf):
	case err != nil:
		s.pageError(w, r, statusOf(err), err.Error())
		return
	default:
		v.Status, v.Turns, v.Runs = view.Status, view.Turns, view.Runs
		if n := len(view.Turns); n > 0 {
			v.After = view.Turns[n-1].LastSeq
		}
		if view.Status == api.StatusSuspended {
			if rec, err := s.runsFor(r.Context()).Get(r.Context(), v.ID); err == nil {
				v.Pending = pendingOf(rec)
				if pend := v.Pending; pend != nil {
					if b := budgetOf(pend.Capability, pend.Args, "/v1/runs/"+url.PathEscape(v.ID)+"/approvals/"+url.PathEscape(pend.CallID), pend.ArgsSHA256); b != nil {
						v.Budget, v.BudgetCall, v.Pending = b, pend.CallID, nil
					}
				}
			}
		}
	}
	s.render(w, r, http.StatusOK, "session", "Session "+agent+"/"+shorten(instance, 24), v)
}

// argField is one argument of a pending tool call, for display.
type argField struct {
	Name, Value string
}

// argFields splits a JSON object into its fields in their order: strings as their text,
// anything else as indented JSON. Anything but an object gives no fields (the page then
// shows the JSON as a whole).
func argFields(raw json.RawMessage) []argField {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []argField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		var str string
		if json.Unmarshal(v, &str) == nil {
			out = append(out, argField{Name: name, Value: str})
		} else {
			out = append(out, argField{Name: name, Value: prettyJSON(v)})
		}
	}
	return out
}

// statusDetail says what a status means for this run, as `starter show` does.
func statusDetail(rec api.Record) string {
	switch {
	case rec.Status == api.StatusSuspended:
		if a, ok := rec.Approval(); ok {
			return fmt.Sprintf("waiting for approval of %s (call %s)", a.Tool, a.CallID)
		}
		if si, ok := rec.Suspend(); ok {
			d := "waiting: " + si.Reason
			if si.ResumeAt != nil {
				d += ", resumes at " + si.ResumeAt.UTC().Format(time.RFC3339)
			}
			return d
		}
	case rec.Error != nil:
		return *rec.Error
	}
	return ""
}

// loginView is the body of the login page.
type loginView struct {
	Next  string
	Error string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.Open() || principalFrom(r.Context()) != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", "Log in", loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

// login trades a token typed into the form for a session cookie. The cookie holds a
// random session id, never the token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.Open() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	t, ok := s.tokenFor(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		s.render(w, r, http.StatusUnauthorized, "login", "Log in", loginView{Next: next, Error: "That token is not one this gateway accepts."})
		return
	}
	if !slices.Contains(t.Scopes, api.ScopeRead) {
		s.render(w, r, http.StatusForbidden, "login", "Log in", loginView{Next: next,
			Error: fmt.Sprintf("Token %s lacks scope read, which the page needs.", t.Name)})
		return
	}
	sess := s.sessions.create(t)
	http.SetCookie(w, sessionCookieFor(r, sess.id, int(s.sessions.ttl.Seconds())))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if p := principalFrom(r.Context()); p != nil && p.session != nil {
		s.sessions.delete(p.session.id)
	}
	http.SetCookie(w, sessionCookieFor(r, "", -1))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site: a path, not "//host" or a URL.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// prettyJSON indents JSON for display; anything else is shown as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return string(unescapeMarkup(buf.Bytes()))
}

// compactJSON is JSON on one line for the events table; "" for null.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return string(unescapeMarkup(buf.Bytes()))
}

// unescapeMarkup turns the \u003c, \u003e and \u0026 escapes that Go's JSON encoder writes
// for <, > and & back into the characters, so a person reads <script> where a tool wrote
// it; html/template then escapes them for the page. It walks escapes left to right, so
// an escaped backslash followed by "u003c" stays as it is.
func unescapeMarkup(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			var c byte
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "003c":
				c = '<'
			case "003e":
				c = '>'
			case "0026":
				c = '&'
			}
			if c != 0 {
				out = append(out, c)
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

func humanSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
