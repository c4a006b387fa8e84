package permissions

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	A = Allow
	D = Deny
	N = NeedsApproval
)

// callFor returns a representative call of capability c.
func callFor(c Capability) Call {
	switch c {
	case CapMCP:
		return Call{Capability: c, Tool: "github_create_issue", Args: map[string]any{"title": "x"}}
	case CapShell:
		return Call{Capability: c, Tool: "shell", Detail: "rm -rf build"}
	case CapWrite:
		return Call{Capability: c, Tool: "write_file", Detail: "out.md"}
	case CapFetch:
		return Call{Capability: c, Tool: "fetch", Detail: "https://example.com/"}
	case CapSearch:
		return Call{Capability: c, Tool: "web_search", Detail: "temporal"}
	}
	return Call{Capability: c, Tool: string(c), Detail: "a.txt"}
}

// TestDecideModeByCapability is the reference table (§4.4) plus the fail-closed cases:
// every mode × every capability under a policy that grants nothing.
func TestDecideModeByCapability(t *testing.T) {
	caps := []Capability{CapRead, CapGlob, CapWrite, CapShell, CapFetch, CapSearch, CapMCP, "exec", ""}
	want := map[Mode][]Decision{
		//               read glob write shell fetch search mcp exec ""
		ModeReadOnly: {A, A, D, D, D, D, D, D, D},
		"":           {A, A, D, D, D, D, D, D, D}, // the default is read_only
		ModeAuto:     {A, A, A, A, A, A, A, D, D},
		ModeAsk:      {A, A, N, N, N, N, N, D, D},
		ModeApprove:  {A, A, N, N, N, N, N, D, D},
		"yolo":       {D, D, D, D, D, D, D, D, D}, // unknown mode: nothing runs
		"READ_ONLY":  {D, D, D, D, D, D, D, D, D},
	}
	for mode, decisions := range want {
		for i, c := range caps {
			t.Run(fmt.Sprintf("%s/%s", mode, c), func(t *testing.T) {
				v := Decide(Policy{Mode: mode}, callFor(c), Approvals{})
				if v.Decision != decisions[i] {
					t.Errorf("Decide(%s, %s) = %v (%s), want %v", mode, c, v.Decision, v.Reason, decisions[i])
				}
				if v.Reason == "" {
					t.Errorf("Decide(%s, %s) gave no reason", mode, c)
				}
			})
		}
	}
}

func TestDecideAllowList(t *testing.T) {
	tests := []struct {
		mode  Mode
		allow []Capability
		call  Call
		want  Decision
	}{
		{ModeReadOnly, []Capability{CapWrite}, callFor(CapWrite), A},
		{ModeReadOnly, []Capability{CapWrite}, callFor(CapShell), D},
		{ModeApprove, []Capability{CapWrite}, callFor(CapWrite), A},
		{ModeApprove, []Capability{CapWrite}, callFor(CapShell), N},
		{ModeAsk, []Capability{CapShell, CapFetch}, callFor(CapFetch), A},
		// allow never grants MCP, even if a policy (invalidly) lists it.
		{ModeReadOnly, []Capability{CapMCP}, callFor(CapMCP), D},
		{ModeApprove, []Capability{CapMCP}, callFor(CapMCP), N},
		// an unknown capability in allow grants nothing
		{ModeReadOnly, []Capability{"exec"}, callFor("exec"), D},
		// an invalid mode is not rescued by allow
		{"bogus", []Capability{CapWrite}, callFor(CapWrite), D},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v/%s", tt.mode, tt.allow, tt.call.Capability), func(t *testing.T) {
			v := Decide(Policy{Mode: tt.mode, Allow: tt.allow}, tt.call, Approvals{})
			if v.Decision != tt.want {
				t.Errorf("Decide = %v (%s), want %v", v.Decision, v.Reason, tt.want)
			}
		})
	}
}

func TestDecideMCP(t *testing.T) {
	mcp := func(tool string) Call { return Call{Capability: CapMCP, Tool: tool} }
	allowList := []string{"github_list_issues", "slack.post"}
	tests := []struct {
		name     string
		mode     Mode
		mcpAllow []string
		call     Call
		want     Decision
	}{
		{"read_only allow-listed", ModeReadOnly, allowList, mcp("github_list_issues"), A},
		{"read_only dotted name", ModeReadOnly, allowList, mcp("slack.post"), A},
		{"read_only not listed", ModeReadOnly, allowList, mcp("github_delete_repo"), D},
		{"read_only exact match only (prefix)", ModeReadOnly, allowList, mcp("github_list_issues_all"), D},
		{"read_only exact match only (case)", ModeReadOnly, allowList, mcp("GITHUB_LIST_ISSUES"), D},
		{"read_only empty list denies all", ModeReadOnly, nil, mcp("github_list_issues"), D},
		{"read_only no tool name", ModeReadOnly, []string{""}, mcp(""), D},
		{"auto", ModeAuto, nil, mcp("anything"), A},
		{"auto no tool name", ModeAuto, nil, mcp(""), D},
		{"ask allow-listed", ModeAsk, allowList, mcp("slack.post"), A},
		{"ask other", ModeAsk, allowList, mcp("github_delete_repo"), N},
		{"approve allow-listed pre-approved", ModeApprove, allowList, mcp("github_list_issues"), A},
		{"approve other", ModeApprove, allowList, mcp("github_delete_repo"), N},
		{"approve no tool name", ModeApprove, nil, mcp(""), D},
		{"invalid mode even if listed", "nope", allowList, mcp("slack.post"), D},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(Policy{Mode: tt.mode, MCPAllow: tt.mcpAllow}, tt.call, Approvals{})
			if v.Decision != tt.want {
				t.Errorf("Decide = %v (%s), want %v", v.Decision, v.Reason, tt.want)
			}
		})
	}
	v := Decide(Policy{}, mcp("github_delete_repo"), Approvals{})
	if !strings.Contains(v.Reason, "github_delete_repo") || !strings.Contains(v.Reason, "mcp_allow") {
		t.Errorf("read_only MCP denial reason %q should name the tool and mcp_allow", v.Reason)
	}
}

func TestRuleMatches(t *testing.T) {
	shell := func(cmd string) Call { return Call{Capability: CapShell, Tool: "shell", Detail: cmd} }
	write := func(p string) Call { return Call{Capability: CapWrite, Tool: "write_file", Detail: p} }
	goTest := Rule{Capability: CapShell, Detail: "go test *"}
	docs := Rule{Capability: CapWrite, Detail: "docs/**"}
	tests := []struct {
		name string
		rule Rule
		call Call
		want bool
	}{
		{"shell prefix", goTest, shell("go test ./..."), true},
		{"shell surrounding spaces", goTest, shell("  go test -run X ./pkg  "), true},
		{"shell other command", goTest, shell("go build ./..."), false},
		{"shell needs the space", goTest, shell("go test"), false},
		{"shell chained &&", goTest, shell("go test ./... && rm -rf /"), false},
		{"shell chained ;", goTest, shell("go test; rm -rf /"), false},
		{"shell piped", goTest, shell("go test ./... | sh"), false},
		{"shell redirect", goTest, shell("go test > /etc/passwd"), false},
		{"shell substitution $()", goTest, shell("go test $(curl evil)"), false},
		{"shell substitution backticks", goTest, shell("go test `curl evil`"), false},
		{"shell newline", goTest, shell("go test ./...\nrm -rf /"), false},
		{"shell background &", goTest, shell("go test & rm -rf /"), false},
		{"shell ? stops too", Rule{Capability: CapShell, Detail: "ls ?"}, shell("ls ;"), false},
		{"shell literal control chars match exactly", Rule{Capability: CapShell, Detail: "make build && make test"}, shell("make build && make test"), true},
		{"shell escaped star is literal", Rule{Capability: CapShell, Detail: `echo \*`}, shell("echo *"), true},
		{"shell escaped star not a wildcard", Rule{Capability: CapShell, Detail: `echo \*`}, shell("echo hi"), false},
		{"shell detail too long", goTest, shell("go test " + strings.Repeat("x", maxMatchDetail)), false},

		{"path under dir", docs, write("docs/a.md"), true},
		{"path deep under dir", docs, write("docs/x/y/z.md"), true},
		{"path /workspace spelling", docs, write("/workspace/docs/a.md"), true},
		{"path dot prefix", docs, write("./docs/a.md"), true},
		{"path cleaned out of dir", docs, write("docs/../secrets.env"), false},
		{"path climbing", docs, write("docs/../../etc/passwd"), false},
		{"path the dir itself", docs, write("docs"), false},
		{"path sibling prefix", docs, write("docsx/a.md"), false},
		{"path absolute host", docs, write("/etc/docs/a.md"), false},
		{"path NUL", docs, write("docs/a\x00.md"), false},
		{"single star stays in segment", Rule{Capability: CapWrite, Detail: "*.md"}, write("sub/a.md"), false},
		{"single star top level", Rule{Capability: CapWrite, Detail: "*.md"}, write("a.md"), true},
		{"**/ matches no directory", Rule{Capability: CapWrite, Detail: "**/*.md"}, write("a.md"), true},
		{"**/ matches directories", Rule{Capability: CapWrite, Detail: "**/*.md"}, write("x/y/a.md"), true},
		{"**/ wrong extension", Rule{Capability: CapWrite, Detail: "**/*.md"}, write("x/a.txt"), false},
		{"? one char not slash", Rule{Capability: CapWrite, Detail: "a?b"}, write("a/b"), false},
		{"? one char", Rule{Capability: CapWrite, Detail: "a?b"}, write("a-b"), true},
		{"pattern that climbs matches nothing", Rule{Capability: CapWrite, Detail: "../**"}, write("../x"), false},

		{"fetch under prefix", Rule{Capability: CapFetch, Detail: "https://docs.example.com/*"}, Call{Capability: CapFetch, Detail: "https://docs.example.com/a/b?q=1"}, true},
		{"fetch look-alike host", Rule{Capability: CapFetch, Detail: "https://docs.example.com/*"}, Call{Capability: CapFetch, Detail: "https://docs.example.com.evil.org/"}, false},
		{"search any", Rule{Capability: CapSearch}, Call{Capability: CapSearch, Detail: "anything"}, true},

		{"mcp tool pattern", Rule{Capability: CapMCP, Tool: "github_*"}, Call{Capability: CapMCP, Tool: "github_create_issue"}, true},
		{"mcp tool pattern other server", Rule{Capability: CapMCP, Tool: "github_*"}, Call{Capability: CapMCP, Tool: "gitlab_create_issue"}, false},
		{"tool pattern on a built-in", Rule{Capability: CapShell, Tool: "shell"}, shell("anything"), true},
		{"tool pattern mismatch", Rule{Capability: CapShell, Tool: "bash"}, shell("anything"), false},

		{"capability mismatch", goTest, Call{Capability: CapWrite, Detail: "go test x"}, false},
		{"unknown capability never matches", Rule{Capability: "exec"}, Call{Capability: "exec"}, false},
		{"empty rule capability never matches", Rule{}, Call{}, false},
		{"blanket rule", Rule{Capability: CapShell}, shell("rm -rf /"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.Matches(tt.call); got != tt.want {
				t.Errorf("%v.Matches(%q) = %v, want %v", tt.rule, tt.call.Detail, got, tt.want)
			}
		})
	}
}

// A pathological pattern against a long subject stays fast (memoised matcher).
func TestWildcardNoBlowup(t *testing.T) {
	pattern := strings.Repeat("*a", 30) + "b"
	subject := strings.Repeat("a", maxMatchDetail)
	start := time.Now()
	for _, k := range []charClass{anyChar, pathChars, shellChars} {
		if wildcard(pattern, subject, k) {
			t.Error("matched, want no match")
		}
	}
	// Linear in states this takes milliseconds; a backtracking matcher takes minutes.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("matching took %v", d)
	}
}

func TestDecideApproveWhen(t *testing.T) {
	rules := []Rule{
		{Capability: CapShell, Detail: "go test *"},
		{Capability: CapWrite, Detail: "docs/**"},
		{Capability: CapMCP, Tool: "github_list_*"},
	}
	tests := []struct {
		mode Mode
		call Call
		want Decision
	}{
		{ModeApprove, Call{Capability: CapShell, Tool: "shell", Detail: "go test ./..."}, A},
		{ModeApprove, Call{Capability: CapShell, Tool: "shell", Detail: "go test ./... && curl x | sh"}, N},
		{ModeApprove, Call{Capability: CapWrite, Tool: "write_file", Detail: "docs/guide.md"}, A},
		{ModeApprove, Call{Capability: CapWrite, Tool: "write_file", Detail: "main.go"}, N},
		{ModeApprove, Call{Capability: CapMCP, Tool: "github_list_issues"}, A},
		{ModeApprove, Call{Capability: CapMCP, Tool: "github_delete_repo"}, N},
		{ModeAsk, Call{Capability: CapShell, Tool: "shell", Detail: "go test ./..."}, A},
		{ModeAsk, Call{Capability: CapFetch, Tool: "fetch", Detail: "https://x"}, N},
		// Rules pre-approve only where a human would otherwise be asked.
		{ModeReadOnly, Call{Capability: CapShell, Tool: "shell", Detail: "go test ./..."}, D},
		{ModeReadOnly, Call{Capability: CapMCP, Tool: "github_list_issues"}, D},
		{"bogus", Call{Capability: CapShell, Tool: "shell", Detail: "go test ./..."}, D},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s%s", tt.mode, tt.call.Capability, tt.call.Tool, tt.call.Detail), func(t *testing.T) {
			v := Decide(Policy{Mode: tt.mode, ApproveWhen: rules}, tt.call, Approvals{})
			if v.Decision != tt.want {
				t.Errorf("Decide = %v (%s), want %v", v.Decision, v.Reason, tt.want)
			}
		})
	}
	v := Decide(Policy{Mode: ModeApprove, ApproveWhen: rules}, Call{Capability: CapWrite, Detail: "docs/a.md"}, Approvals{})
	if !strings.Contains(v.Reason, "approve_when[1]") {
		t.Errorf("reason %q should name the rule that allowed the call", v.Reason)
	}
}

func TestDecideRememberedApprovals(t *testing.T) {
	shell := Call{Capability: CapShell, Tool: "shell", Detail: "make"}
	write := Call{Capability: CapWrite, Tool: "write_file", Detail: "a.go"}
	gh := Call{Capability: CapMCP, Tool: "github_create_issue"}
	always := Approvals{}.Remember(shell, true).Remember(gh, true)
	never := Approvals{}.Remember(shell, false)
	goTest := []Rule{{Capability: CapShell, Detail: "make*"}}
	tests := []struct {
		name      string
		policy    Policy
		call      Call
		approvals Approvals
		want      Decision
	}{
		{"always approves later calls of the tool", Policy{Mode: ModeApprove}, Call{Capability: CapShell, Tool: "shell", Detail: "rm -rf build"}, always, A},
		{"always under ask", Policy{Mode: ModeAsk}, shell, always, A},
		{"always is per tool", Policy{Mode: ModeApprove}, Call{Capability: CapShell, Tool: "other_shell", Detail: "make"}, always, N},
		{"always is per capability", Policy{Mode: ModeApprove}, write, always, N},
		{"always for an MCP tool", Policy{Mode: ModeApprove}, gh, always, A},
		{"always for one MCP tool only", Policy{Mode: ModeApprove}, Call{Capability: CapMCP, Tool: "github_delete_repo"}, always, N},
		{"always does not widen read_only", Policy{}, shell, always, D},
		{"always does not widen read_only MCP", Policy{}, gh, always, D},
		{"never denies without asking", Policy{Mode: ModeApprove}, shell, never, D},
		{"never wins over a rule", Policy{Mode: ModeApprove, ApproveWhen: goTest}, shell, never, D},
		{"never does not override allow", Policy{Mode: ModeApprove, Allow: []Capability{CapShell}}, shell, never, A},
		{"latest decision wins", Policy{Mode: ModeApprove}, shell, never.Remember(shell, true), A},
		{"and back", Policy{Mode: ModeApprove}, shell, always.Remember(shell, false), D},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.policy, tt.call, tt.approvals)
			if v.Decision != tt.want {
				t.Errorf("Decide = %v (%s), want %v", v.Decision, v.Reason, tt.want)
			}
		})
	}
}

func TestApprovalsIsAValue(t *testing.T) {
	x := Call{Capability: CapShell, Tool: "shell"}
	y := Call{Capability: CapMCP, Tool: "a_tool"}
	z := Call{Capability: CapFetch, Tool: "fetch"}
	base := Approvals{Always: make([]Grant, 0, 8)} // spare capacity must not be shared
	b1 := base.Remember(x, true)
	b2 := base.Remember(y, true)
	if len(base.Always) != 0 {
		t.Errorf("Remember modified the receiver: %v", base.Always)
	}
	if !reflect.DeepEqual(b1.Always, []Grant{{CapShell, "shell"}}) || !reflect.DeepEqual(b2.Always, []Grant{{CapMCP, "a_tool"}}) {
		t.Errorf("copies interfere: b1 %v, b2 %v", b1.Always, b2.Always)
	}
	b3 := b1.Remember(x, false)
	if !reflect.DeepEqual(b1.Always, []Grant{{CapShell, "shell"}}) || len(b1.Never) != 0 {
		t.Errorf("Remember(false) modified its receiver: %+v", b1)
	}
	if len(b3.Always) != 0 || !reflect.DeepEqual(b3.Never, []Grant{{CapShell, "shell"}}) {
		t.Errorf("after refusing: %+v, want only Never shell", b3)
	}
	// Sorted whatever the order of decisions, so state is deterministic; no duplicates.
	s := Approvals{}.Remember(z, true).Remember(x, true).Remember(y, true).Remember(z, true)
	want := []Grant{{CapFetch, "fetch"}, {CapMCP, "a_tool"}, {CapShell, "shell"}}
	if !reflect.DeepEqual(s.Always, want) {
		t.Errorf("Always = %v, want %v", s.Always, want)
	}
	// JSON round trip (run state).
	b, err := json.Marshal(s.Remember(x, false))
	if err != nil {
		t.Fatal(err)
	}
	var back Approvals
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if v := Decide(Policy{Mode: ModeApprove}, x, back); v.Decision != D {
		t.Errorf("after JSON round trip %s: shell = %v, want deny", b, v.Decision)
	}
	if v := Decide(Policy{Mode: ModeApprove}, z, back); v.Decision != A {
		t.Errorf("after JSON round trip %s: fetch = %v, want allow", b, v.Decision)
	}
}

func TestNeverAllows(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   map[Capability]bool
	}{
		{"read_only default", Policy{}, map[Capability]bool{
			CapRead: false, CapGlob: false, CapWrite: true, CapShell: true, CapFetch: true, CapSearch: true, CapMCP: true, "exec": true}},
		{"read_only with allow and mcp_allow", Policy{Mode: ModeReadOnly, Allow: []Capability{CapShell}, MCPAllow: []string{"t"}}, map[Capability]bool{
			CapRead: false, CapWrite: true, CapShell: false, CapFetch: true, CapMCP: false}},
		{"auto", Policy{Mode: ModeAuto}, map[Capability]bool{
			CapWrite: false, CapShell: false, CapMCP: false, "exec": true, "": true}},
		{"ask", Policy{Mode: ModeAsk}, map[Capability]bool{CapWrite: false, CapShell: false, CapMCP: false}},
		{"approve must reach the gate", Policy{Mode: ModeApprove}, map[Capability]bool{
			CapWrite: false, CapShell: false, CapFetch: false, CapSearch: false, CapMCP: false}},
		{"invalid mode", Policy{Mode: "x", Allow: []Capability{CapRead}}, map[Capability]bool{
			CapRead: true, CapGlob: true, CapWrite: true, CapMCP: true}},
	}
	for _, tt := range tests {
		for c, want := range tt.want {
			t.Run(fmt.Sprintf("%s/%s", tt.name, c), func(t *testing.T) {
				if got := NeverAllows(tt.policy, c); got != want {
					t.Errorf("NeverAllows(%+v, %q) = %v, want %v", tt.policy, c, got, want)
				}
			})
		}
	}
	mcp := []struct {
		policy Policy
		tool   string
		want   bool
	}{
		{Policy{}, "t", true},
		{Policy{MCPAllow: []string{"t"}}, "t", false},
		{Policy{MCPAllow: []string{"t"}}, "u", true},
		{Policy{Mode: ModeApprove}, "u", false},
		{Policy{Mode: ModeAsk}, "u", false},
		{Policy{Mode: ModeAuto}, "u", false},
		{Policy{Mode: ModeAuto}, "", true},
		{Policy{Mode: "x", MCPAllow: []string{"t"}}, "t", true},
	}
	for _, tt := range mcp {
		if got := NeverAllowsMCP(tt.policy, tt.tool); got != tt.want {
			t.Errorf("NeverAllowsMCP(%+v, %q) = %v, want %v", tt.policy, tt.tool, got, tt.want)
		}
	}
}

// NeverAllows must never contradict Decide: when it says a tool is not worth offering,
// every call of it is denied, whatever its tool name, detail, rules or remembered
// approvals. Checked exhaustively over a grid of policies and calls.
func TestNeverAllowsAgreesWithDecide(t *testing.T) {
	caps := append(Capabilities(), "exec", "")
	var policies []Policy
	for _, mode := range []Mode{"", ModeReadOnly, ModeAuto, ModeAsk, ModeApprove, "bogus"} {
		for _, allow := range [][]Capability{nil, {CapWrite}, {CapShell, CapMCP, "exec"}} {
			for _, mcpAllow := range [][]string{nil, {"t1"}, {""}} {
				for _, rules := range [][]Rule{nil, {{Capability: CapShell}, {Capability: CapMCP}, {Capability: CapWrite, Detail: "**"}}} {
					policies = append(policies, Policy{Mode: mode, Allow: allow, MCPAllow: mcpAllow, ApproveWhen: rules})
				}
			}
		}
	}
	tools := []string{"", "t1", "t2", "shell"}
	details := []string{"", "a.txt", "go test ./..."}
	checked := 0
	for _, p := range policies {
		for _, c := range caps {
			for _, tool := range tools {
				for _, detail := range details {
					call := Call{Capability: c, Tool: tool, Detail: detail}
					for _, ap := range []Approvals{{}, Approvals{}.Remember(call, true), Approvals{}.Remember(call, false)} {
						v := Decide(p, call, ap)
						checked++
						if NeverAllows(p, c) && v.Decision != Deny {
							t.Fatalf("NeverAllows(%+v, %q) but Decide(%+v, %+v) = %v (%s)", p, c, call, ap, v.Decision, v.Reason)
						}
						if c == CapMCP && NeverAllowsMCP(p, tool) && v.Decision != Deny {
							t.Fatalf("NeverAllowsMCP(%+v, %q) but Decide = %v (%s)", p, tool, v.Decision, v.Reason)
						}
					}
				}
			}
		}
	}
	if checked < 10_000 {
		t.Errorf("checked only %d combinations", checked)
	}
}

func TestParseMode(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Mode
	}{{"", ModeReadOnly}, {"read_only", ModeReadOnly}, {"auto", ModeAuto}, {"ask", ModeAsk}, {"approve", ModeApprove}} {
		got, err := ParseMode(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"readonly", "READ_ONLY", "Auto", " auto", "yolo"} {
		_, err := ParseMode(bad)
		if !errors.Is(err, ErrUnknownMode) {
			t.Errorf("ParseMode(%q) err = %v, want ErrUnknownMode", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "read_only, auto, ask, approve") {
			t.Errorf("ParseMode(%q) error %q should name the input and the valid modes", bad, err)
		}
	}
}

func TestParseCapability(t *testing.T) {
	for _, c := range Capabilities() {
		if got, err := ParseCapability(string(c)); err != nil || got != c {
			t.Errorf("ParseCapability(%q) = %q, %v", c, got, err)
		}
	}
	if _, err := ParseCapability("exec"); !errors.Is(err, ErrUnknownCapability) || !strings.Contains(err.Error(), "read, glob, write") {
		t.Errorf("ParseCapability(exec) err = %v", err)
	}
	caps := Capabilities()
	caps[0] = "exec"
	if Capabilities()[0] != CapRead {
		t.Error("Capabilities returned shared state")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   []string // substrings of the error; nil = valid
		is     []error
	}{
		{name: "zero policy", policy: Policy{}},
		{name: "full policy", policy: Policy{
			Mode: ModeApprove, Allow: []Capability{CapRead, CapGlob, CapWrite}, MCPAllow: []string{"github_list_issues", "slack.post"},
			ApproveWhen: []Rule{{Capability: CapShell, Detail: "go test *"}, {Capability: CapMCP, Tool: "github_*"}, {Capability: CapWrite, Detail: "/workspace/docs/**"}},
		}},
		{name: "unknown mode", policy: Policy{Mode: "yolo"}, want: []string{"mode:", `"yolo"`}, is: []error{ErrUnknownMode}},
		{name: "unknown capability in allow", policy: Policy{Allow: []Capability{CapRead, "exec"}}, want: []string{"allow[1]:", `"exec"`}, is: []error{ErrUnknownCapability}},
		{name: "mcp in allow", policy: Policy{Allow: []Capability{CapMCP}}, want: []string{"allow[0]:", "mcp_allow"}, is: []error{ErrInvalidPolicy}},
		{name: "mcp_allow entries", policy: Policy{MCPAllow: []string{"ok", " ", "github_*"}}, want: []string{"mcp_allow[1]: ", "empty", "mcp_allow[2]:", "exact"}, is: []error{ErrInvalidPolicy}},
		{name: "rule without capability", policy: Policy{ApproveWhen: []Rule{{Detail: "x"}}}, want: []string{"approve_when[0].capability:", "required"}, is: []error{ErrInvalidPolicy}},
		{name: "rule with unknown capability", policy: Policy{ApproveWhen: []Rule{{Capability: CapShell}, {Capability: "exec"}}}, want: []string{"approve_when[1].capability:"}, is: []error{ErrUnknownCapability}},
		{name: "path rule leaving the workspace", policy: Policy{ApproveWhen: []Rule{{Capability: CapWrite, Detail: "../**"}}}, want: []string{"approve_when[0].detail:"}, is: []error{ErrInvalidPolicy}},
		{name: "absolute host path rule", policy: Policy{ApproveWhen: []Rule{{Capability: CapWrite, Detail: "/etc/*"}}}, want: []string{"approve_when[0].detail:"}, is: []error{ErrInvalidPolicy}},
		{name: "unfinished escape", policy: Policy{ApproveWhen: []Rule{{Capability: CapShell, Detail: `echo \`}}}, want: []string{"approve_when[0].detail:", "escape"}, is: []error{ErrInvalidPolicy}},
		{name: "unfinished escape in tool", policy: Policy{ApproveWhen: []Rule{{Capability: CapMCP, Tool: `gh\`}}}, want: []string{"approve_when[0].tool:"}, is: []error{ErrInvalidPolicy}},
		{name: "invalid regex names rule and argument", policy: Policy{DenyWhen: []Rule{{Capability: CapShell}, {Capability: CapShell, ArgsRegex: map[string]string{"command": "rm -(rf"}}}},
			want: []string{"deny_when[1].args_regex.command:", `"rm -(rf"`, "missing closing )"}, is: []error{ErrInvalidPolicy}},
		{name: "empty regex", policy: Policy{ApproveWhen: []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": ""}}}},
			want: []string{"approve_when[0].args_regex.command:", "empty regular expression"}, is: []error{ErrInvalidPolicy}},
		{name: "empty argument name", policy: Policy{ApproveWhen: []Rule{{Capability: CapShell, Args: map[string]string{"": "x"}}}},
			want: []string{"approve_when[0].args:", "empty argument name"}, is: []error{ErrInvalidPolicy}},
		{name: "empty glob", policy: Policy{DenyWhen: []Rule{{Capability: CapWrite, Args: map[string]string{"path": ""}}}},
			want: []string{"deny_when[0].args.path:", "empty pattern"}, is: []error{ErrInvalidPolicy}},
		{name: "glob with an unfinished escape", policy: Policy{ApproveWhen: []Rule{{Capability: CapMCP, Args: map[string]string{"q": `a\`}}}},
			want: []string{"approve_when[0].args.q:", "unfinished escape"}, is: []error{ErrInvalidPolicy}},
		{name: "path glob leaving the workspace", policy: Policy{ApproveWhen: []Rule{{Capability: CapWrite, Args: map[string]string{"path": "../**"}}}},
			want: []string{"approve_when[0].args.path:", "inside the workspace"}, is: []error{ErrInvalidPolicy}},
		{name: "deny rule without capability", policy: Policy{DenyWhen: []Rule{{ArgsRegex: map[string]string{"command": "rm"}}}},
			want: []string{"deny_when[0].capability:", "required"}, is: []error{ErrInvalidPolicy}},
		{name: "argument rules", policy: Policy{Mode: ModeApprove,
			ApproveWhen: []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": `^go test \./\.\.\.$`}}, {Capability: CapWrite, Args: map[string]string{"path": "drafts/**"}}},
			DenyWhen:    []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": `rm\s+-rf`}, Reason: "never"}}}},
		{name: "deadlines", policy: Policy{Mode: ModeApprove, ApprovalTimeout: "24h", OnTimeout: OnTimeoutEscalate,
			ApproveWhen: []Rule{{Capability: CapShell, ApprovalTimeout: "90s", OnTimeout: OnTimeoutApprove}, {Capability: CapWrite, ApprovalTimeout: "1h"}}}},
		{name: "bad approval_timeout", policy: Policy{ApprovalTimeout: "soon"}, want: []string{"approval_timeout:", `"soon" is not a duration`}, is: []error{ErrInvalidPolicy}},
		{name: "zero approval_timeout", policy: Policy{ApprovalTimeout: "0s"}, want: []string{"approval_timeout:", "not positive"}, is: []error{ErrInvalidPolicy}},
		{name: "unknown on_timeout", policy: Policy{ApprovalTimeout: "1h", OnTimeout: "retry"}, want: []string{"on_timeout:", `"retry"`, "deny, approve, escalate"}, is: []error{ErrInvalidPolicy}},
		{name: "on_timeout alone", policy: Policy{OnTimeout: OnTimeoutDeny}, want: []string{"on_timeout:", "without an approval_timeout"}, is: []error{ErrInvalidPolicy}},
		{name: "rule deadline named", policy: Policy{ApproveWhen: []Rule{{Capability: CapShell}, {Capability: CapShell, ApprovalTimeout: "2 days"}}},
			want: []string{"approve_when[1].approval_timeout:", `"2 days"`}, is: []error{ErrInvalidPolicy}},
		{name: "deadline on deny_when", policy: Policy{DenyWhen: []Rule{{Capability: CapShell, OnTimeout: OnTimeoutApprove}}},
			want: []string{"deny_when[0].approval_timeout:"}, is: []error{ErrInvalidPolicy}},
		{name: "every problem reported", policy: Policy{Mode: "x", Allow: []Capability{"y"}, MCPAllow: []string{"*"}},
			want: []string{"mode:", "allow[0]:", "mcp_allow[0]:"}, is: []error{ErrUnknownMode, ErrUnknownCapability, ErrInvalidPolicy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
			for _, e := range tt.is {
				if !errors.Is(err, e) {
					t.Errorf("Validate() = %q, want errors.Is %v", err, e)
				}
			}
		})
	}
}

func TestPolicyJSON(t *testing.T) {
	in := `{"mode":"approve","allow":["write"],"mcp_allow":["gh_list"],"approve_when":[{"capability":"shell","detail":"go test *"},{"capability":"mcp","tool":"gh_*"}],` +
		`"deny_when":[{"capability":"shell","args_regex":{"command":"rm -rf"},"reason":"never"},{"capability":"write","args":{"path":".git/**"}}]}`
	var p Policy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := Policy{Mode: ModeApprove, Allow: []Capability{CapWrite}, MCPAllow: []string{"gh_list"},
		ApproveWhen: []Rule{{Capability: CapShell, Detail: "go test *"}, {Capability: CapMCP, Tool: "gh_*"}},
		DenyWhen: []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": "rm -rf"}, Reason: "never"},
			{Capability: CapWrite, Args: map[string]string{"path": ".git/**"}}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("decoded %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestDecisionText(t *testing.T) {
	var zero Verdict
	if zero.Decision != Deny || zero.Allowed() {
		t.Errorf("zero Verdict = %v, want a denial", zero.Decision)
	}
	b, err := json.Marshal(Verdict{Decision: NeedsApproval, Reason: "r"})
	if err != nil || string(b) != `{"decision":"needs_approval","reason":"r"}` {
		t.Errorf("json = %s, %v", b, err)
	}
	for _, d := range []Decision{Deny, Allow, NeedsApproval} {
		var back Decision
		txt, _ := d.MarshalText()
		if err := back.UnmarshalText(txt); err != nil || back != d {
			t.Errorf("round trip of %v = %v, %v", d, back, err)
		}
	}
	if _, err := Decision(7).MarshalText(); err == nil {
		t.Error("MarshalText of an unknown decision succeeded")
	}
	var d Decision
	if err := d.UnmarshalText([]byte("maybe")); err == nil {
		t.Error("UnmarshalText(maybe) succeeded")
	}
	if Decision(7).String() != "decision(7)" {
		t.Errorf("String() = %q", Decision(7).String())
	}
}

func TestReasons(t *testing.T) {
	tests := []struct {
		policy Policy
		call   Call
		want   []string
	}{
		{Policy{}, Call{Capability: CapWrite, Detail: "out.md"}, []string{"write (out.md)", "read_only", "allow: [write]"}},
		{Policy{Mode: ModeApprove}, Call{Capability: CapShell, Detail: "make"}, []string{"shell (make)", "needs approval", "approve mode"}},
		{Policy{Mode: "x"}, Call{Capability: CapRead}, []string{"mode", `"x"`}},
		{Policy{Mode: ModeAuto}, Call{Capability: "exec"}, []string{`unknown capability "exec"`}},
	}
	for _, tt := range tests {
		v := Decide(tt.policy, tt.call, Approvals{})
		for _, w := range tt.want {
			if !strings.Contains(v.Reason, w) {
				t.Errorf("Decide(%+v, %+v).Reason = %q, want it to mention %q", tt.policy, tt.call, v.Reason, w)
			}
		}
	}
	long := Call{Capability: CapShell, Detail: strings.Repeat("x ", 5000)}
	if v := Decide(Policy{Mode: ModeApprove}, long, Approvals{}); len(v.Reason) > 300 {
		t.Errorf("reason for a 10,000-char command is %d bytes; want it shortened", len(v.Reason))
	}
}

func TestRuleArgs(t *testing.T) {
	shell := func(args map[string]any) Call {
		cmd, _ := args["command"].(string)
		return Call{Capability: CapShell, Tool: "shell", Detail: cmd, Args: args}
	}
	write := func(p string) Call {
		return Call{Capability: CapWrite, Tool: "write_file", Detail: p, Args: map[string]any{"path": p, "content": "x"}}
	}
	mcp := func(tool string, args map[string]any) Call { return Call{Capability: CapMCP, Tool: tool, Args: args} }
	goTestRe := Rule{Capability: CapShell, ArgsRegex: map[string]string{"command": `^go test \./\.\.\.$`}}
	rmRe := Rule{Capability: CapShell, ArgsRegex: map[string]string{"command": `\brm\s+-[a-z]*(rf|fr)`}}
	drafts := Rule{Capability: CapWrite, Args: map[string]string{"path": "drafts/**"}}
	fsWrite := Rule{Capability: CapMCP, Tool: "fs_*", Args: map[string]string{"path": "drafts/*"}}
	tests := []struct {
		name string
		rule Rule
		call Call
		want outcome
	}{
		{"regex matches the command", goTestRe, shell(map[string]any{"command": "go test ./..."}), matched},
		{"regex anchored refuses a longer command", goTestRe, shell(map[string]any{"command": "go test ./... && rm -rf /"}), noMatch},
		{"regex other command", goTestRe, shell(map[string]any{"command": "go vet ./..."}), noMatch},
		{"regex unanchored finds rm -rf anywhere", rmRe, shell(map[string]any{"command": "cd x && rm -rf build"}), matched},
		{"regex -fr spelling", rmRe, shell(map[string]any{"command": "rm -fr x"}), matched},
		{"regex no rm", rmRe, shell(map[string]any{"command": "ls -rf"}), noMatch},
		{"regex on a long argument still decides", rmRe, shell(map[string]any{"command": strings.Repeat("x", 3*maxMatchDetail) + " rm -rf x"}), matched},
		{"missing argument does not match", goTestRe, shell(map[string]any{}), noMatch},
		{"nil args do not match", goTestRe, Call{Capability: CapShell, Tool: "shell"}, noMatch},
		{"number matched as JSON text", Rule{Capability: CapShell, ArgsRegex: map[string]string{"timeout_seconds": `^[0-9]{1,2}$`}}, shell(map[string]any{"command": "x", "timeout_seconds": float64(60)}), matched},
		{"big number as JSON text", Rule{Capability: CapShell, ArgsRegex: map[string]string{"timeout_seconds": `^[0-9]{1,2}$`}}, shell(map[string]any{"command": "x", "timeout_seconds": float64(600)}), noMatch},
		{"int from Go", Rule{Capability: CapShell, Args: map[string]string{"timeout_seconds": "6?"}}, shell(map[string]any{"command": "x", "timeout_seconds": 60}), matched},
		{"json.Number", Rule{Capability: CapShell, Args: map[string]string{"timeout_seconds": "60"}}, shell(map[string]any{"command": "x", "timeout_seconds": json.Number("60")}), matched},
		{"boolean as JSON text", Rule{Capability: CapMCP, Args: map[string]string{"force": "false"}}, mcp("gh_push", map[string]any{"force": false}), matched},
		{"object cannot be settled", goTestRe, shell(map[string]any{"command": map[string]any{"x": 1}}), unsure},
		{"array cannot be settled", drafts, Call{Capability: CapWrite, Tool: "write_file", Args: map[string]any{"path": []any{"drafts/a"}}}, unsure},
		{"null cannot be settled", goTestRe, shell(map[string]any{"command": nil}), unsure},

		{"path glob under dir", drafts, write("drafts/notes.md"), matched},
		{"path glob deep", drafts, write("drafts/a/b.md"), matched},
		{"path glob /workspace spelling", drafts, write("/workspace/drafts/a.md"), matched},
		{"path glob cleaned out of dir", drafts, write("drafts/../main.go"), noMatch},
		{"path glob climbing cannot be settled", drafts, write("drafts/../../etc/passwd"), unsure},
		{"path glob other dir", drafts, write("src/a.go"), noMatch},
		{"path glob and detail both must match", Rule{Capability: CapWrite, Detail: "**/*.md", Args: map[string]string{"path": "drafts/**"}}, write("drafts/a.go"), noMatch},
		{"path glob too long", drafts, write("drafts/" + strings.Repeat("x", maxMatchDetail)), unsure},

		{"shell glob stays out of chains", Rule{Capability: CapShell, Args: map[string]string{"command": "go test *"}}, shell(map[string]any{"command": "go test ./... ; rm -rf /"}), noMatch},
		{"shell glob", Rule{Capability: CapShell, Args: map[string]string{"command": "go test *"}}, shell(map[string]any{"command": " go test ./... "}), matched},

		{"mcp arg glob", fsWrite, mcp("fs_write", map[string]any{"path": "drafts/a.md"}), matched},
		{"mcp arg glob other tool", fsWrite, mcp("gh_write", map[string]any{"path": "drafts/a.md"}), noMatch},
		{"mcp arg with .. cannot be settled", fsWrite, mcp("fs_write", map[string]any{"path": "drafts/../.git/config"}), unsure},
		{"every argument must match", Rule{Capability: CapMCP, Args: map[string]string{"repo": "me/*", "branch": "feature-*"}}, mcp("gh_push", map[string]any{"repo": "me/x", "branch": "main"}), noMatch},
		{"every argument matches", Rule{Capability: CapMCP, Args: map[string]string{"repo": "me/*", "branch": "feature-*"}}, mcp("gh_push", map[string]any{"repo": "me/x", "branch": "feature-1"}), matched},
		{"no match wins over cannot settle", Rule{Capability: CapMCP, Args: map[string]string{"repo": "me/*", "branch": "x"}}, mcp("gh_push", map[string]any{"repo": "other/x", "branch": nil}), noMatch},

		{"invalid regex cannot be settled", Rule{Capability: CapShell, ArgsRegex: map[string]string{"command": "("}}, shell(map[string]any{"command": "("}), unsure},
		{"invalid rule of another capability does not match", Rule{Capability: CapWrite, ArgsRegex: map[string]string{"path": "("}}, shell(map[string]any{"command": "x"}), noMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rule.check(tt.call)
			if got.outcome != tt.want {
				t.Errorf("%v against %v = %v (%s), want %v", tt.rule, tt.call.Args, got.outcome, got.why, tt.want)
			}
			if got.outcome == unsure && got.why == "" {
				t.Errorf("%v against %v cannot be settled but says not why", tt.rule, tt.call.Args)
			}
			if tt.rule.Matches(tt.call) != (tt.want == matched) {
				t.Errorf("Matches = %v, want %v", !(tt.want == matched), tt.want == matched)
			}
		})
	}
}

// The README's three lines: allow `go test ./...`, ask for anything else, never `rm -rf`.
func TestDecideThreeLines(t *testing.T) {
	p := Policy{
		Mode:        ModeApprove,
		ApproveWhen: []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": `^go test \./\.\.\.$`}}},
		DenyWhen:    []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": `\brm\s+-[a-z]*(rf|fr)`}, Reason: "never rm -rf"}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	sh := func(cmd string) Call {
		return Call{Capability: CapShell, Tool: "shell", Detail: cmd, Args: map[string]any{"command": cmd}}
	}
	tests := []struct {
		cmd    string
		want   Decision
		reason string
	}{
		{"go test ./...", A, `allowed by approve_when[0] (shell command =~ "^go test \\./\\.\\.\\.$")`},
		{"go test ./... && rm -rf /", D, "denied by deny_when[0]: never rm -rf"},
		{"go build ./...", N, "needs approval"},
		{"rm -rf x", D, "shell (rm -rf x) denied by deny_when[0]: never rm -rf"},
		{"cd /tmp; rm -fr *", D, "never rm -rf"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			v := Decide(p, sh(tt.cmd), Approvals{})
			if v.Decision != tt.want || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("Decide(%q) = %v (%s), want %v mentioning %q", tt.cmd, v.Decision, v.Reason, tt.want, tt.reason)
			}
		})
	}
}

// deny_when refuses before anything else can allow, in every mode; what it cannot rule out
// is refused too.
func TestDecideDenyWhen(t *testing.T) {
	secrets := Rule{Capability: CapRead, Args: map[string]string{"path": "**/.env"}, Reason: "secrets stay unread"}
	rm := Rule{Capability: CapShell, ArgsRegex: map[string]string{"command": `rm\s+-rf`}}
	push := Rule{Capability: CapMCP, Tool: "gh_push*", Args: map[string]string{"branch": "main"}, Reason: "no pushes to main"}
	rmCall := Call{Capability: CapShell, Tool: "shell", Detail: "rm -rf x", Args: map[string]any{"command": "rm -rf x"}}
	tests := []struct {
		name      string
		policy    Policy
		call      Call
		approvals Approvals
		want      Decision
		reason    string
	}{
		{"over auto", Policy{Mode: ModeAuto, DenyWhen: []Rule{rm}}, rmCall, Approvals{}, D, `deny_when[0]: shell command =~ "rm\\s+-rf"`},
		{"over allow", Policy{Allow: []Capability{CapShell}, DenyWhen: []Rule{rm}}, rmCall, Approvals{}, D, "deny_when[0]"},
		{"over approve_when", Policy{Mode: ModeApprove, ApproveWhen: []Rule{{Capability: CapShell}}, DenyWhen: []Rule{rm}}, rmCall, Approvals{}, D, "deny_when[0]"},
		{"over a human's always", Policy{Mode: ModeApprove, DenyWhen: []Rule{rm}}, rmCall, Approvals{}.Remember(rmCall, true), D, "deny_when[0]"},
		{"over read in every mode", Policy{DenyWhen: []Rule{secrets}},
			Call{Capability: CapRead, Tool: "read_file", Detail: "app/.env", Args: map[string]any{"path": "app/.env"}}, Approvals{}, D, "read (app/.env) denied by deny_when[0]: secrets stay unread"},
		{"other reads still run", Policy{DenyWhen: []Rule{secrets}},
			Call{Capability: CapRead, Tool: "read_file", Detail: "README.md", Args: map[string]any{"path": "README.md"}}, Approvals{}, A, "allowed in every mode"},
		{"over mcp_allow", Policy{MCPAllow: []string{"gh_push"}, DenyWhen: []Rule{push}},
			Call{Capability: CapMCP, Tool: "gh_push", Args: map[string]any{"branch": "main"}}, Approvals{}, D, "no pushes to main"},
		{"mcp other branch", Policy{MCPAllow: []string{"gh_push"}, DenyWhen: []Rule{push}},
			Call{Capability: CapMCP, Tool: "gh_push", Args: map[string]any{"branch": "dev"}}, Approvals{}, A, "mcp_allow"},
		{"cannot rule out a non-string argument", Policy{Mode: ModeAuto, DenyWhen: []Rule{push}},
			Call{Capability: CapMCP, Tool: "gh_push", Args: map[string]any{"branch": []any{"main"}}}, Approvals{}, D, `cannot rule it out: argument "branch" is an array`},
		{"a missing argument is not refused", Policy{Mode: ModeAuto, DenyWhen: []Rule{push}},
			Call{Capability: CapMCP, Tool: "gh_push", Args: map[string]any{}}, Approvals{}, A, "auto"},
		{"an invalid rule refuses its capability", Policy{Mode: ModeAuto, DenyWhen: []Rule{{Capability: CapShell, ArgsRegex: map[string]string{"command": "("}}}},
			Call{Capability: CapShell, Tool: "shell", Detail: "ls", Args: map[string]any{"command": "ls"}}, Approvals{}, D, "the rule is invalid"},
		{"the first matching rule names itself", Policy{Mode: ModeAuto, DenyWhen: []Rule{push, rm}}, rmCall, Approvals{}, D, "deny_when[1]"},
		{"other capabilities untouched", Policy{Mode: ModeApprove, DenyWhen: []Rule{rm}},
			Call{Capability: CapWrite, Tool: "write_file", Detail: "a", Args: map[string]any{"path": "a", "content": "rm -rf x"}}, Approvals{}, N, "needs approval"},
		{"an unknown mode still denies first", Policy{Mode: "yolo", DenyWhen: []Rule{rm}}, rmCall, Approvals{}, D, "mode is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.policy, tt.call, tt.approvals)
			if v.Decision != tt.want || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("Decide = %v (%s), want %v mentioning %q", v.Decision, v.Reason, tt.want, tt.reason)
			}
		})
	}
}

// A deny_when rule that names a capability (or an MCP tool) and nothing else stops the
// tool being offered; NeverAllows never contradicts Decide.
func TestNeverAllowsDenyWhen(t *testing.T) {
	p := Policy{Mode: ModeAuto, DenyWhen: []Rule{{Capability: CapFetch}, {Capability: CapShell, Detail: "rm *"}, {Capability: CapMCP, Tool: "gh_delete_*"}}}
	if !NeverAllows(p, CapFetch) {
		t.Error("NeverAllows(fetch) = false under deny_when [{capability: fetch}]")
	}
	if v := Decide(p, Call{Capability: CapFetch, Tool: "fetch", Detail: "https://x"}, Approvals{}); v.Decision != D {
		t.Errorf("Decide(fetch) = %v, want deny", v.Decision)
	}
	if NeverAllows(p, CapShell) {
		t.Error("NeverAllows(shell) = true, but only rm commands are denied")
	}
	if NeverAllows(p, CapMCP) || NeverAllowsMCP(p, "gh_list") {
		t.Error("NeverAllows for MCP = true, but only gh_delete_* is denied")
	}
	if !NeverAllowsMCP(p, "gh_delete_repo") {
		t.Error("NeverAllowsMCP(gh_delete_repo) = false under deny_when tool gh_delete_*")
	}
	if v := Decide(p, Call{Capability: CapMCP, Tool: "gh_delete_repo"}, Approvals{}); v.Decision != D {
		t.Errorf("Decide(gh_delete_repo) = %v, want deny", v.Decision)
	}
}

// Rules carrying none of the new fields decide, and explain, exactly as before: an old
// run's recorded policy replays the same decisions.
func TestRulesWithoutArgsUnchanged(t *testing.T) {
	p := Policy{Mode: ModeApprove, ApproveWhen: []Rule{{Capability: CapShell, Detail: "go test *"}}}
	c := Call{Capability: CapShell, Tool: "shell", Detail: "go test ./...", Args: map[string]any{"command": "go test ./..."}}
	v := Decide(p, c, Approvals{})
	if want := `shell (go test ./...) allowed by approve_when[0] (shell "go test *")`; v.Decision != A || v.Reason != want {
		t.Errorf("Decide = %v %q, want allow %q", v.Decision, v.Reason, want)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"mode":"approve","approve_when":[{"capability":"shell","detail":"go test *"}]}`; string(b) != want {
		t.Errorf("policy JSON = %s, want %s (the agent checkpoint of old runs)", b, want)
	}
}

// TestDecideDeadline: a call that needs approval carries the deadline of the approve_when
// rule that made it need approval, else the policy's; a rule with a deadline asks a human
// instead of pre-approving, unless the human said "always".
func TestDecideDeadline(t *testing.T) {
	p := Policy{Mode: ModeApprove, ApprovalTimeout: "24h",
		ApproveWhen: []Rule{{Capability: CapShell, Detail: "go test *", ApprovalTimeout: "15m", OnTimeout: OnTimeoutApprove}, {Capability: CapShell, Detail: "ls*"}}}
	sh := func(cmd string) Call { return Call{Capability: CapShell, Tool: "shell", Detail: cmd} }
	tests := []struct {
		name      string
		call      Call
		approvals Approvals
		want      Decision
		deadline  Deadline
	}{
		{"rule with a deadline asks, with its deadline", sh("go test ./..."), Approvals{}, NeedsApproval, Deadline{Timeout: "15m", OnTimeout: OnTimeoutApprove}},
		{"no rule: the policy's deadline", sh("make"), Approvals{}, NeedsApproval, Deadline{Timeout: "24h"}},
		{"rule without a deadline still pre-approves", sh("ls -l"), Approvals{}, Allow, Deadline{}},
		{"always wins over the rule's deadline", sh("go test ./..."), Approvals{}.Remember(sh("x"), true), Allow, Deadline{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(p, tt.call, tt.approvals)
			if v.Decision != tt.want || v.Deadline != tt.deadline {
				t.Errorf("Decide = %v %+v (%s), want %v %+v", v.Decision, v.Deadline, v.Reason, tt.want, tt.deadline)
			}
		})
	}
	if d := (Deadline{Timeout: "24h"}); d.Duration() != 24*time.Hour || d.Action() != OnTimeoutDeny {
		t.Errorf("Deadline{24h} = %v %s, want 24h deny", d.Duration(), d.Action())
	}
}
