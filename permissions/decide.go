package permissions

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Decide decides one call under policy p, given what humans already decided in this run.
// It is pure and total: every input, valid or not, gets a Verdict, and anything that
// cannot be understood is denied.
//
// Every call, first:
//  1. an invalid mode, or an unknown or empty capability → Deny;
//  2. a deny_when rule that matches the call, or cannot rule it out → Deny, in every mode,
//     with the rule's reason. A policy without deny_when decides exactly as before
//     deny_when existed, so a run recorded before it replays the same decisions.
//
// Built-in capabilities, then, in order:
//  3. read and glob → Allow (in every mode);
//  4. a capability in p.Allow → Allow;
//  5. auto → Allow; read_only → Deny;
//  6. ask and approve: a remembered "never" → Deny; a matching approve_when rule → Allow
//     (one with an approval_timeout: a remembered "always" → Allow, else NeedsApproval
//     with the rule's deadline); a remembered "always" → Allow; otherwise NeedsApproval
//     with the policy's deadline.
//
// MCP (CapMCP, decided per tool name; p.Allow does not apply), then:
//  3. an empty tool name → Deny;
//  4. auto → Allow;
//  5. the tool named exactly in p.MCPAllow → Allow;
//  6. read_only → Deny;
//  7. ask and approve: as step 6 above (rules with capability mcp).
//
// Unlike Nexo, ask and approve decide MCP calls the same way (Nexo's ask ignored mcp_allow
// and its predicate), and a human's "never" wins over any rule.
func Decide(p Policy, c Call, approvals Approvals) Verdict {
	mode, err := ParseMode(string(p.Mode))
	if err != nil {
		return deny("%s denied: the policy's mode is invalid (%v)", describe(c), err)
	}
	if !c.Capability.known() {
		return deny("%s denied: unknown capability %q", describe(c), c.Capability)
	}
	if v, ok := denied(p, c); ok {
		return v
	}
	if c.Capability == CapMCP {
		return decideMCP(mode, p, c, approvals)
	}
	if !c.Capability.Privileged() {
		return allow("%s allowed: %s is allowed in every mode", describe(c), c.Capability)
	}
	if p.allows(c.Capability) {
		return allow("%s allowed: %s is granted by allow", describe(c), c.Capability)
	}
	switch mode {
	case ModeAuto:
		return allow("%s allowed in auto mode", describe(c))
	case ModeReadOnly:
		return deny("%s denied in read_only mode (grant it with allow: [%s], or use mode approve)", describe(c), c.Capability)
	}
	return gated(mode, p, c, approvals)
}

func decideMCP(mode Mode, p Policy, c Call, approvals Approvals) Verdict {
	if c.Tool == "" {
		return deny("mcp call denied: it names no tool")
	}
	if mode == ModeAuto {
		return allow("%s allowed in auto mode", describe(c))
	}
	if slices.Contains(p.MCPAllow, c.Tool) {
		return allow("%s allowed: it is in mcp_allow", describe(c))
	}
	if mode == ModeReadOnly {
		return deny("%s denied in read_only mode (not in mcp_allow)", describe(c))
	}
	return gated(mode, p, c, approvals)
}

// denied applies p.DenyWhen: the first rule that matches c, or cannot rule it out, denies.
func denied(p Policy, c Call) (Verdict, bool) {
	for i, r := range p.DenyWhen {
		k := r.check(c)
		if err := r.validate(); err != nil && r.Capability == c.Capability {
			// A deny rule that cannot be read refuses what it may have meant to.
			k = check{outcome: unsure, why: fmt.Sprintf("the rule is invalid: %v", err)}
		}
		why := r.Reason
		if why == "" {
			why = r.String()
		}
		switch k.outcome {
		case matched:
			return deny("%s denied by deny_when[%d]: %s", describe(c), i, why), true
		case unsure:
			return deny("%s denied: deny_when[%d] (%s) cannot rule it out: %s", describe(c), i, why, k.why), true
		}
	}
	return Verdict{}, false
}

// gated decides a call under ask or approve that no grant covered.
func gated(mode Mode, p Policy, c Call, approvals Approvals) Verdict {
	approved, remembered := approvals.lookup(c)
	if remembered && !approved {
		return deny("%s denied: a human refused %s for the rest of this run", describe(c), toolName(c))
	}
	for i, r := range p.ApproveWhen {
		if r.Matches(c) {
			if r.ApprovalTimeout != "" {
				// A rule with a deadline asks a human first (a remembered "always" still
				// lets the call through).
				if remembered {
					return allow("%s allowed: a human approved %s for the rest of this run", describe(c), toolName(c))
				}
				return Verdict{Decision: NeedsApproval, Deadline: Deadline{Timeout: r.ApprovalTimeout, OnTimeout: r.OnTimeout},
					Reason: fmt.Sprintf("%s needs approval by approve_when[%d] (%s) within %s, else %s", describe(c), i, r, r.ApprovalTimeout, Deadline{OnTimeout: r.OnTimeout}.Action())}
			}
			if r.Reason != "" {
				return allow("%s allowed by approve_when[%d] (%s): %s", describe(c), i, r, r.Reason)
			}
			return allow("%s allowed by approve_when[%d] (%s)", describe(c), i, r)
		}
	}
	if remembered {
		return allow("%s allowed: a human approved %s for the rest of this run", describe(c), toolName(c))
	}
	return Verdict{Decision: NeedsApproval, Reason: fmt.Sprintf("%s needs approval (%s mode)", describe(c), mode),
		Deadline: Deadline{Timeout: p.ApprovalTimeout, OnTimeout: p.OnTimeout}}
}

// NeverAllows reports whether Decide denies every call with capability c under p, whatever
// its tool, detail or approvals — so the agent should not offer tools of that capability
// to the model (Nexo 0.11 "stop advertising"). It is true for privileged capabilities
// under read_only that Allow does not grant, for unknown capabilities, for every capability
// when the mode is invalid, for CapMCP under read_only with an empty MCPAllow, and for a
// capability a deny_when rule refuses whole (it names the capability and nothing else).
// Otherwise it is false under ask and approve: those must reach the gate to ask. Not a security boundary:
// Decide still gates every call.
func NeverAllows(p Policy, c Capability) bool {
	mode, err := ParseMode(string(p.Mode))
	if err != nil || !c.known() || deniesAll(p, c, "") {
		return true
	}
	if c == CapMCP {
		return mode == ModeReadOnly && len(p.MCPAllow) == 0
	}
	if !c.Privileged() || p.allows(c) {
		return false
	}
	return mode == ModeReadOnly
}

// NeverAllowsMCP is NeverAllows for one MCP tool: true when Decide denies every call of
// tool under p — under read_only when the tool is not in MCPAllow, for an empty name, for
// an invalid mode, and when a deny_when rule refuses the tool whole (by capability mcp and
// a tool pattern, nothing else). Nexo offered every MCP tool even when none could run.
func NeverAllowsMCP(p Policy, tool string) bool {
	mode, err := ParseMode(string(p.Mode))
	if err != nil || tool == "" || deniesAll(p, CapMCP, tool) {
		return true
	}
	return mode == ModeReadOnly && !slices.Contains(p.MCPAllow, tool)
}

// deniesAll reports whether a deny_when rule refuses every call of capability c (and, when
// tool is set, of that tool): one that names the capability and nothing else, or whose
// tool pattern covers tool and nothing else.
func deniesAll(p Policy, c Capability, tool string) bool {
	for _, r := range p.DenyWhen {
		if r.Capability != c || r.Detail != "" || len(r.Args) > 0 || len(r.ArgsRegex) > 0 {
			continue
		}
		if r.Tool == "" || (tool != "" && wildcard(r.Tool, tool, anyChar)) {
			return true
		}
	}
	return false
}

func allow(format string, args ...any) Verdict {
	return Verdict{Decision: Allow, Reason: fmt.Sprintf(format, args...)}
}

func deny(format string, args ...any) Verdict {
	return Verdict{Decision: Deny, Reason: fmt.Sprintf(format, args...)}
}

// maxReasonDetail bounds how much of a call's detail a reason repeats.
const maxReasonDetail = 120

// describe names a call in a reason: `shell (go test ./...)`, `mcp tool "create_issue"`.
func describe(c Call) string {
	if c.Capability == CapMCP {
		return fmt.Sprintf("mcp tool %q", c.Tool)
	}
	name := string(c.Capability)
	if name == "" {
		name = "call"
	}
	if c.Detail == "" {
		return name
	}
	d := strings.Join(strings.Fields(c.Detail), " ")
	if utf8.RuneCountInString(d) > maxReasonDetail {
		d = string([]rune(d)[:maxReasonDetail]) + "…"
	}
	return fmt.Sprintf("%s (%s)", name, d)
}

// toolName names what a remembered decision covers.
func toolName(c Call) string {
	if c.Tool == "" {
		return string(c.Capability)
	}
	return fmt.Sprintf("%q", c.Tool)
}
