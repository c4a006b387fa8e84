package sandbox

import (
	"fmt"
	"path"
	"strings"
)

// Glob syntax shared by every tier, so a pattern means the same thing wherever it runs:
//
//   - a pattern is matched against workspace-relative, slash-separated file paths;
//   - within one path segment, path.Match syntax applies: "*" (any run of characters, never
//     "/"), "?", "[a-z]", "[^x]", and "\" to escape;
//   - a segment that is exactly "**" matches zero or more whole segments ("**/*.go",
//     "docs/**", "a/**/b");
//   - "{a,b}" alternatives are expanded first (nested braces work), as in a shell, since
//     models write "**/*.{go,md}" often.
//
// Only files are matched, never directories.

// maxBraceExpansions bounds "{a,b}" expansion, so a pattern cannot explode combinatorially.
const maxBraceExpansions = 256

// globPattern is one brace alternative of a pattern, cleaned and split into segments.
type globPattern struct {
	segs []string
}

// compileGlob expands braces, then cleans each alternative like a path (refusing ones that
// climb above the workspace, with ErrEscape) and checks its syntax.
func compileGlob(pattern string, roots ...string) ([]globPattern, error) {
	if pattern == "" {
		return nil, fmt.Errorf("%w: empty pattern", path.ErrBadPattern)
	}
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	out := make([]globPattern, 0, len(alts))
	for _, alt := range alts {
		rel, err := relPath(alt, roots...)
		if err != nil {
			return nil, err
		}
		segs := strings.Split(rel, "/")
		for _, s := range segs {
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("%w in %q", err, s)
			}
		}
		out = append(out, globPattern{segs: segs})
	}
	return out, nil
}

// match reports whether the workspace-relative file path name matches the pattern.
func (g globPattern) match(name string) bool {
	return matchSegments(g.segs, strings.Split(name, "/"))
}

// literalPrefix is the leading run of segments without wildcards: the directory a walk
// can start from. "." when the first segment already has one.
func (g globPattern) literalPrefix() string {
	n := 0
	for n < len(g.segs)-1 && !hasMeta(g.segs[n]) {
		n++
	}
	if n == 0 {
		return "."
	}
	return strings.Join(g.segs[:n], "/")
}

// mayMatchUnder reports whether some file under the directory dir (workspace-relative)
// could match, so a walk can skip the rest.
func (g globPattern) mayMatchUnder(dir string) bool {
	if dir == "." {
		return true
	}
	ds := strings.Split(dir, "/")
	for i, d := range ds {
		if i >= len(g.segs) {
			return false
		}
		if g.segs[i] == "**" {
			return true
		}
		if ok, _ := path.Match(g.segs[i], d); !ok {
			return false
		}
	}
	// A file below dir has at least one more segment than dir.
	return len(ds) < len(g.segs)
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// matchSegments matches pattern segments against name segments; "**" spans zero or more
// segments. Dynamic programming over (pattern, name) positions keeps it O(len·len) even for
// patterns with several "**".
func matchSegments(pat, name []string) bool {
	P, N := len(pat), len(name)
	// next[j] holds the result for pat[i+1:] vs name[j:], cur for pat[i:].
	next := make([]bool, N+1)
	cur := make([]bool, N+1)
	next[N] = true
	for i := P - 1; i >= 0; i-- {
		for j := N; j >= 0; j-- {
			switch {
			case pat[i] == "**":
				cur[j] = next[j] || (j < N && cur[j+1])
			case j < N:
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			default:
				cur[j] = false
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// expandBraces expands shell-style "{a,b}" alternatives, left to right, recursively. A
// brace without a matching "}" or without a top-level comma is literal. "\{" is literal.
func expandBraces(p string) ([]string, error) {
	out := []string{}
	var expand func(string) error
	expand = func(s string) error {
		open, close, commas := findBrace(s)
		if open < 0 {
			if len(out) >= maxBraceExpansions {
				return fmt.Errorf("%w: more than %d brace alternatives", path.ErrBadPattern, maxBraceExpansions)
			}
			out = append(out, s)
			return nil
		}
		start := open + 1
		for _, c := range append(commas, close) {
			if err := expand(s[:open] + s[start:c] + s[close+1:]); err != nil {
				return err
			}
			start = c + 1
		}
		return nil
	}
	if err := expand(p); err != nil {
		return nil, err
	}
	return out, nil
}

// findBrace finds the first "{" that has a matching "}" and at least one top-level comma,
// returning their offsets; open is -1 when there is none.
func findBrace(s string) (open, close int, commas []int) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth := 0
			var cs []int
			for j := i; j < len(s); j++ {
				switch s[j] {
				case '\\':
					j++
				case '{':
					depth++
				case ',':
					if depth == 1 {
						cs = append(cs, j)
					}
				case '}':
					depth--
					if depth == 0 {
						if len(cs) > 0 {
							return i, j, cs
						}
						j = len(s) // "{x}" without a comma stays literal
					}
				}
			}
		}
	}
	return -1, -1, nil
}
