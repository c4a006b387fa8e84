package agents

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/nexo-temporal/nexo/api"
)

// LocaleUTF8 in requires.locale accepts any UTF-8 locale (C.UTF-8, en_US.utf8, ...).
const LocaleUTF8 = "utf8"

var (
	commandName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*$`)
	localeName  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._@-]*$`)
	versionText = regexp.MustCompile(`\d+(\.\d+)+`)
	numbers     = regexp.MustCompile(`\d+(\.\d+)*`)
	clauseText  = regexp.MustCompile(`^(>=|<=|~>|!=|==|=|>|<)?\s*v?(\d+(\.\d+)*)$`)
)

// Constraint is a version constraint of requires.commands: "" or "*" (any version), or
// clauses joined by commas, each an operator and a dotted version:
//
//	>=3.10   at least 3.10          <2     below 2
//	>3.9     above 3.9              <=2.7  at most 2.7
//	=3.10    3.10 or any 3.10.x     !=3.9  anything but 3.9 and 3.9.x
//	3.10     the same as =3.10      ~>3.1  3.1 or newer, below 4 (~>3.1.2: below 3.2)
//
// Missing components count as 0 in comparisons (3.10 = 3.10.0 < 3.10.1).
type Constraint struct {
	raw     string
	clauses []clause
}

type clause struct {
	op string
	v  []int
}

// ParseConstraint reads a constraint; a malformed one is an error saying what is wanted.
func ParseConstraint(s string) (Constraint, error) {
	c := Constraint{raw: strings.TrimSpace(s)}
	if c.raw == "" || c.raw == "*" {
		return c, nil
	}
	for _, part := range strings.Split(c.raw, ",") {
		m := clauseText.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return Constraint{}, fmt.Errorf("%q is not a version constraint (want e.g. \">=3.10\", \">=1.2, <2\", \"~>3.1\" or \"*\")", s)
		}
		op := m[1]
		switch op {
		case "", "==":
			op = "="
		}
		c.clauses = append(c.clauses, clause{op: op, v: parseVersion(m[2])})
	}
	return c, nil
}

// String is the constraint as written.
func (c Constraint) String() string { return c.raw }

// Any reports whether every version satisfies the constraint.
func (c Constraint) Any() bool { return len(c.clauses) == 0 }

// Allows reports whether version (dotted numbers: "3.11.7") satisfies every clause.
func (c Constraint) Allows(version string) bool {
	v := parseVersion(version)
	for _, cl := range c.clauses {
		cmp := compareVersions(v, cl.v)
		var ok bool
		switch cl.op {
		case ">=":
			ok = cmp >= 0
		case ">":
			ok = cmp > 0
		case "<=":
			ok = cmp <= 0
		case "<":
			ok = cmp < 0
		case "=":
			ok = hasPrefix(v, cl.v)
		case "!=":
			ok = !hasPrefix(v, cl.v)
		case "~>":
			// ~>3.1 is >=3.1, <4; ~>3.1.2 is >=3.1.2, <3.2; ~>3 is >=3.
			upper := append([]int(nil), cl.v...)
			if len(upper) > 1 {
				upper = upper[:len(upper)-1]
				upper[len(upper)-1]++
			} else {
				upper = nil
			}
			ok = cmp >= 0 && (upper == nil || compareVersions(v, upper) < 0)
		}
		if !ok {
			return false
		}
	}
	return true
}

// ExtractVersion returns the first dotted number in text ("Python 3.11.7" → "3.11.7",
// "v20.1.0" → "20.1.0"), or "" when it holds none (a lone number, as in "sh: 0: Illegal
// option --", is not taken for a version).
func ExtractVersion(text string) string { return versionText.FindString(text) }

func parseVersion(s string) []int {
	var out []int
	for _, p := range strings.Split(numbers.FindString(s), ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	return out
}

func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// hasPrefix: v's leading components are p's (3.10.12 has prefix 3.10; 3.1 and 3.100 do not).
func hasPrefix(v, p []int) bool {
	if len(v) < len(p) {
		v = append(append([]int(nil), v...), make([]int, len(p)-len(v))...)
	}
	for i := range p {
		if v[i] != p[i] {
			return false
		}
	}
	return true
}

// validateRequires reports the problems of a requires declaration, each naming its field.
func validateRequires(r api.Requirements, sandboxType string, bad func(field, format string, a ...any)) {
	if r.IsZero() {
		return
	}
	if sandboxType == api.SandboxVirtual {
		bad("requires", "a virtual sandbox has no shell to probe; use a local or docker sandbox, or drop requires")
	}
	for _, name := range sortedNames(r.Commands) {
		field := "requires.commands." + name
		if !commandName.MatchString(name) {
			bad(field, "%q is not a command name", name)
			continue
		}
		if _, err := ParseConstraint(r.Commands[name]); err != nil {
			bad(field, "%v", err)
		}
	}
	if r.Locale != "" && !localeName.MatchString(r.Locale) {
		bad("requires.locale", "%q is not a locale (want utf8 for any UTF-8 locale, or a name such as C.UTF-8)", r.Locale)
	}
}

// Unmet compares a probed environment with the requirements and returns every one it does
// not meet, in a stable order (commands by name, then the locale):
//
//	python3 missing
//	python3 3.8.10 does not satisfy >=3.10
//	no locale set (LANG, LC_CTYPE and LC_ALL are empty), want utf8
//	locale is POSIX, want utf8
//
// A command whose version cannot be read satisfies any constraint (its presence is what
// can be checked).
func Unmet(r api.Requirements, env api.ProbeSandboxResult) []string {
	var out []string
	for _, name := range sortedNames(r.Commands) {
		info, ok := env.Commands[name]
		if !ok || info.Path == "" {
			out = append(out, name+" missing")
			continue
		}
		c, err := ParseConstraint(r.Commands[name])
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if !c.Any() && info.Version != "" && !c.Allows(info.Version) {
			out = append(out, fmt.Sprintf("%s %s does not satisfy %s", name, info.Version, c))
		}
	}
	if want := r.Locale; want != "" {
		got := env.Locale
		switch {
		case got == "":
			out = append(out, fmt.Sprintf("no locale set (LANG, LC_CTYPE and LC_ALL are empty), want %s", want))
		case isUTF8Alias(want):
			if !isUTF8Locale(got) {
				out = append(out, fmt.Sprintf("locale is %s, want %s", got, want))
			}
		case normLocale(got) != normLocale(want):
			out = append(out, fmt.Sprintf("locale is %s, want %s", got, want))
		}
	}
	return out
}

func isUTF8Alias(s string) bool { return normLocale(s) == LocaleUTF8 }

func isUTF8Locale(s string) bool { return strings.Contains(normLocale(s), "utf8") }

// normLocale folds case and dashes, so C.UTF-8 and c.utf8 are one locale.
func normLocale(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
