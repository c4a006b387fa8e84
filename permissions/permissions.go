// Package permissions decides whether an agent's tool call may run. It is pure — no I/O,
// no clock, no randomness, only the standard library — so a workflow can call Decide
// directly and replay gets the same answer.
//
// A Policy (mode, allow, mcp_allow, approve_when, deny_when) comes from the agent
// definition. Each tool call is described as a Call (capability, tool name, detail,
// arguments) and Decide returns a Verdict:
// Allow, Deny, or NeedsApproval (the caller asks a human interactively under ModeAsk, or
// suspends the run for an approval signal under ModeApprove). What humans already decided
// in the run (an "always" approval, a "never" denial) travels in Approvals, a value the
// workflow keeps in its state.
//
// Everything fails closed: the zero Policy is read_only; an unknown mode denies every call;
// an unknown or empty capability is denied in every mode (Nexo let unknown capabilities
// through read_only); MCP tools are denied under read_only unless named exactly in
// mcp_allow; a rule that cannot be read grants nothing. NeverAllows and NeverAllowsMCP tell
// the agent which tools not to offer the model at all, and never contradict Decide: when
// they report true, Decide denies every such call.
package permissions

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors of policy parsing and validation; test with errors.Is.
var (
	// ErrUnknownMode: a mode other than read_only, auto, ask, approve.
	ErrUnknownMode = errors.New("unknown permission mode")
	// ErrUnknownCapability: a capability other than read, glob, write, shell, fetch,
	// search, mcp.
	ErrUnknownCapability = errors.New("unknown capability")
	// ErrInvalidPolicy: a field that is well-formed but cannot mean what it says (mcp in
	// allow, a pattern in mcp_allow, a rule pattern that does not parse).
	ErrInvalidPolicy = errors.New("invalid permission policy")
)

// Mode is how calls to privileged capabilities are decided.
type Mode string

// The modes. The empty Mode means ModeReadOnly.
const (
	// ModeReadOnly allows read and glob (and capabilities in Policy.Allow, and MCP tools
	// in Policy.MCPAllow) and denies everything else without asking. The default.
	ModeReadOnly Mode = "read_only"
	// ModeAuto allows every known capability and every MCP tool.
	ModeAuto Mode = "auto"
	// ModeAsk is ModeApprove for a caller with a human at hand (a terminal session): a
	// call that needs approval is asked about interactively; a caller that cannot ask
	// denies it.
	ModeAsk Mode = "ask"
	// ModeApprove allows what the policy pre-approves and what a human approved for the
	// rest of the run; anything else needs approval, for which the run suspends until an
	// approval signal decides it.
	ModeApprove Mode = "approve"
)

var modes = []Mode{ModeReadOnly, ModeAuto, ModeAsk, ModeApprove}

// ParseMode returns the mode named s; "" is ModeReadOnly. An unknown name is an error
// wrapping ErrUnknownMode that lists the valid ones.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeReadOnly, nil
	}
	for _, m := range modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w %q (want one of read_only, auto, ask, approve)", ErrUnknownMode, s)
}

// Capability is what a tool call does, the unit permissions are granted in.
type Capability string

// The capabilities. Every built-in tool declares exactly one; MCP tools are CapMCP.
const (
	CapRead   Capability = "read"   // read a workspace file (read_file)
	CapGlob   Capability = "glob"   // list workspace files (glob)
	CapWrite  Capability = "write"  // create or replace a workspace file (write_file)
	CapShell  Capability = "shell"  // run a command in the sandbox (shell)
	CapFetch  Capability = "fetch"  // fetch a URL from the worker (fetch)
	CapSearch Capability = "search" // query a web-search backend (web_search)
	CapMCP    Capability = "mcp"    // call a tool of an MCP server; decided per tool name
	CapAgent  Capability = "agent"  // run another agent as a child run (agent_<name>, delegates)
	CapA2A    Capability = "a2a"    // send a message to a remote A2A agent (a2a_<name>)
)

var capabilities = []Capability{CapRead, CapGlob, CapWrite, CapShell, CapFetch, CapSearch, CapMCP, CapAgent, CapA2A}

// Capabilities returns every capability, in a stable order (a fresh slice).
func Capabilities() []Capability { return slices.Clone(capabilities) }

// ParseCapability returns the capability named s, or an error wrapping
// ErrUnknownCapability that lists the valid ones.
func ParseCapability(s string) (Capability, error) {
	c := Capability(s)
	if !c.known() {
		return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownCapability, s, capabilityList())
	}
	return c, nil
}

// Privileged reports whether c acts beyond reading the workspace: everything but read and
// glob. read_only denies privileged capabilities unless granted; read and glob are allowed
// in every (valid) mode. An unknown capability is privileged.
func (c Capability) Privileged() bool { return c != CapRead && c != CapGlob }

func (c Capability) known() bool { return slices.Contains(capabilities, c) }

func capabilityList() string {
	names := make([]string, len(capabilities))
	for i, c := range capabilities {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// Policy is an agent's permissions, as declared in its definition (YAML under the agent's
// `permissions:` key, or Go). The zero value is read_only with nothing granted. Policy is a
// plain value: copy it freely; Decide never modifies it.
type Policy struct {
	// Mode decides privileged calls; empty means read_only.
	Mode Mode `json:"mode,omitempty" mapstructure:"mode" yaml:"mode"`
	// Allow grants capabilities in every mode without asking ("allow: [write]" under
	// read_only lets the agent write but not run commands). It does not grant MCP tools.
	Allow []Capability `json:"allow,omitempty" mapstructure:"allow" yaml:"allow"`
	// MCPAllow names MCP tools allowed without asking, in every mode: exact names, no
	// patterns. Empty means no MCP tool is allowed under read_only.
	MCPAllow []string `json:"mcp_allow,omitempty" mapstructure:"mcp_allow" yaml:"mcp_allow"`
	// ApproveWhen lists calls pre-approved under ask and approve: a call matching any
	// rule runs without a human. Ignored under read_only (use Allow) and auto (everything
	// runs). See Rule for the matching.
	ApproveWhen []Rule `json:"approve_when,omitempty" mapstructure:"approve_when" yaml:"approve_when"`
	// DenyWhen lists calls refused in every mode, before anything else may allow them
	// (allow, mcp_allow, auto, approve_when, a human's "always", even read and glob): a
	// call matching any rule, or one a rule cannot rule out, is denied with the rule's
	// Reason. See Rule for the matching.
	DenyWhen []Rule `json:"deny_when,omitempty" mapstructure:"deny_when" yaml:"deny_when"`
	// ApprovalTimeout is how long a call that needs approval waits for a human under
	// approve ("24h"); empty waits forever. An approve_when rule may set its own.
	ApprovalTimeout string `json:"approval_timeout,omitempty" mapstructure:"approval_timeout" yaml:"approval_timeout"`
	// OnTimeout is what happens when ApprovalTimeout passes: deny (the default), approve,
	// or escalate. See OnTimeout.
	OnTimeout OnTimeout `json:"on_timeout,omitempty" mapstructure:"on_timeout" yaml:"on_timeout"`
}

// Validate reports every problem of the policy, each naming its field (mode,
// allow[i], mcp_allow[i], approve_when[i].field, deny_when[i].field), joined with errors.Join. A policy that
// fails validation still decides safely (Decide fails closed), but an agent definition
// carrying one should be rejected at load time.
func (p Policy) Validate() error {
	var errs []error
	if _, err := ParseMode(string(p.Mode)); err != nil {
		errs = append(errs, fmt.Errorf("mode: %w", err))
	}
	for i, c := range p.Allow {
		if _, err := ParseCapability(string(c)); err != nil {
			errs = append(errs, fmt.Errorf("allow[%d]: %w", i, err))
		} else if c == CapMCP {
			errs = append(errs, fmt.Errorf("allow[%d]: %w: allow does not grant MCP tools; name them in mcp_allow", i, ErrInvalidPolicy))
		}
	}
	for i, name := range p.MCPAllow {
		switch {
		case strings.TrimSpace(name) == "":
			errs = append(errs, fmt.Errorf("mcp_allow[%d]: %w: empty tool name", i, ErrInvalidPolicy))
		case strings.ContainsAny(name, `*?[\`):
			errs = append(errs, fmt.Errorf("mcp_allow[%d]: %w: %q looks like a pattern, but mcp_allow takes exact tool names (use approve_when with capability mcp for patterns)", i, ErrInvalidPolicy, name))
		}
	}
	if err := validateDeadline(p.ApprovalTimeout, p.OnTimeout); err != nil {
		errs = append(errs, err)
	}
	if p.Mode == ModeAuto {
		// An auto agent never asks a human, so a deadline on an answer can never apply.
		if p.ApprovalTimeout != "" {
			errs = append(errs, fmt.Errorf("approval_timeout: %w: mode auto never asks for approval, so a deadline never applies; remove it or use mode approve", ErrInvalidPolicy))
		}
		for i, r := range p.ApproveWhen {
			if r.ApprovalTimeout != "" {
				errs = append(errs, fmt.Errorf("approve_when[%d].approval_timeout: %w: mode auto never asks for approval, so a deadline never applies; remove it or use mode approve", i, ErrInvalidPolicy))
			}
		}
	}
	for i, r := range p.ApproveWhen {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("approve_when[%d].%w", i, err))
		} else if err := validateDeadline(r.ApprovalTimeout, r.OnTimeout); err != nil {
			errs = append(errs, fmt.Errorf("approve_when[%d].%w", i, err))
		}
	}
	for i, r := range p.DenyWhen {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("deny_when[%d].%w", i, err))
		}
		if r.ApprovalTimeout != "" || r.OnTimeout != "" {
			errs = append(errs, fmt.Errorf("deny_when[%d].approval_timeout: %w: a deny_when rule refuses at once; deadlines belong on approve_when rules or the policy", i, ErrInvalidPolicy))
		}
	}
	return errors.Join(errs...)
}

// allows reports whether c is granted by Allow.
func (p Policy) allows(c Capability) bool { return slices.Contains(p.Allow, c) }

// Call describes one tool call for a decision.
type Call struct {
	// Capability is what the call does (the tool's declared capability).
	Capability Capability `json:"capability"`
	// Tool is the tool's name as the model sees it: "shell", "write_file", or the MCP
	// tool's name. Approvals are remembered per (Capability, Tool).
	Tool string `json:"tool"`
	// Detail is what the call acts on, as the tool received it, and what rules match:
	// the path for read and write, the pattern for glob, the command for shell, the URL for
	// fetch, the query for search; for MCP, whatever summary the caller chose (often empty).
	Detail string `json:"detail,omitempty"`
	// Args are the call's arguments, as the tool received them (decoded JSON): what rules'
	// args and args_regex match, and what the approval record shows a human.
	Args map[string]any `json:"args,omitempty"`
}

// Decision is the outcome of Decide. The zero value is Deny, so a forgotten or corrupted
// decision refuses.
type Decision int

// The decisions.
const (
	// Deny: the call must not run; Verdict.Reason says why (tell the model).
	Deny Decision = iota
	// Allow: the call may run now.
	Allow
	// NeedsApproval: a human must decide. Under ModeAsk the caller asks interactively
	// (and denies if it cannot); under ModeApprove the run suspends for an approval signal.
	NeedsApproval
)

var decisionNames = [...]string{Deny: "deny", Allow: "allow", NeedsApproval: "needs_approval"}

// String returns "deny", "allow" or "needs_approval".
func (d Decision) String() string {
	if d >= 0 && int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return fmt.Sprintf("decision(%d)", int(d))
}

// MarshalText makes a Decision readable in JSON (run events, approval records).
func (d Decision) MarshalText() ([]byte, error) {
	if d < 0 || int(d) >= len(decisionNames) {
		return nil, fmt.Errorf("marshal decision: unknown value %d", int(d))
	}
	return []byte(decisionNames[d]), nil
}

// UnmarshalText parses what MarshalText produced.
func (d *Decision) UnmarshalText(b []byte) error {
	for i, n := range decisionNames {
		if n == string(b) {
			*d = Decision(i)
			return nil
		}
	}
	return fmt.Errorf("unmarshal decision: unknown value %q", b)
}

// Verdict is Decide's answer: the decision and a reason a person (or the model, on Deny)
// can act on, e.g. "write denied in read_only mode (grant it with allow: [write], or use
// mode approve)".
type Verdict struct {
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
	// Deadline, on NeedsApproval, is how long the call waits for a human and what
	// happens then: the deadline of the approve_when rule that made it need approval,
	// else the policy's. Zero waits forever.
	Deadline Deadline `json:"deadline,omitzero"`
}

// Allowed reports whether the call may run now.
func (v Verdict) Allowed() bool { return v.Decision == Allow }
