package skills

import (
	"errors"
	"fmt"
	"github.com/nexo-temporal/nexo/internal/suggest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/nexo-temporal/nexo/api"
)

// Error is one problem of a SKILL.md: the file, the line (0 when unknown), the
// front-matter field (or "body"), and what is wrong. It matches ErrInvalid.
type Error struct {
	File    string
	Line    int
	Field   string
	Problem string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Problem)
	return b.String()
}

// Is makes every Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// knownKeys are the front-matter keys of the Agent Skills format. Anything else is an
// error (a typo such as "descripton" must not silently drop the description); free-form
// properties go under metadata:.
var knownKeys = []string{"name", "description", "compatibility", "license", "allowed-tools", "metadata"}

// Parse reads a SKILL.md: YAML front matter between "---" lines, then the Markdown body.
// file names the source in errors. It reports every problem at once (errors.Join of
// *Error). It does not check the name against a folder; Load does.
func Parse(file string, data []byte) (Skill, error) {
	p, errs := parse(file, data)
	return p.Skill, errors.Join(errs...)
}

// parsed is a Skill plus where its name was declared, for Load's folder check.
type parsed struct {
	Skill
	nameLine int
}

func parse(file string, data []byte) (parsed, []error) {
	var (
		p    parsed
		errs []error
	)
	bad := func(line int, field, format string, a ...any) {
		errs = append(errs, &Error{File: file, Line: line, Field: field, Problem: fmt.Sprintf(format, a...)})
	}
	if !utf8.Valid(data) {
		bad(0, "", "is not UTF-8 text")
		return p, errs
	}
	text := strings.ReplaceAll(strings.TrimPrefix(string(data), "\ufeff"), "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		bad(1, "", `no front matter: the file must start with a line "---", then name: and description:, then a line "---", then the instructions`)
		return p, errs
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \t"); l == "---" || l == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		bad(1, "", `front matter is not closed: add a line "---" after its last key`)
		return p, errs
	}
	front := strings.Join(lines[1:end], "\n")
	p.Body = strings.TrimSpace(strings.Join(lines[end+1:], "\n"))

	// Front-matter line L is file line L+1 (the opening "---" is line 1).
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		bad(0, "front matter", "not YAML: %s", shiftLines(strings.TrimPrefix(err.Error(), "yaml: ")))
		return p, errs
	}
	if len(doc.Content) == 0 {
		bad(2, "front matter", "is empty: want name: and description:")
		return p, errs
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		bad(m.Line+1, "front matter", "want key: value lines (name:, description:, ...)")
		return p, errs
	}
	seen := map[string]int{}
	failed := map[string]bool{}
	text1 := func(k, v *yaml.Node) (string, bool) {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			bad(v.Line+1, k.Value, "want text")
			failed[k.Value] = true
			return "", false
		}
		return v.Value, true
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		line := k.Line + 1
		if prev, dup := seen[k.Value]; dup {
			bad(line, k.Value, "declared twice (first on line %d)", prev)
			continue
		}
		seen[k.Value] = line
		switch k.Value {
		case "name":
			if s, ok := text1(k, v); ok {
				p.Name, p.nameLine = strings.TrimSpace(s), line
			}
		case "description":
			if s, ok := text1(k, v); ok {
				p.Description = strings.TrimSpace(s)
			}
		case "compatibility":
			if s, ok := text1(k, v); ok {
				p.Compatibility = strings.TrimSpace(s)
			}
		case "license":
			if s, ok := text1(k, v); ok {
				p.License = strings.TrimSpace(s)
			}
		case "allowed-tools":
			switch v.Kind {
			case yaml.ScalarNode:
				p.AllowedTools = strings.Fields(strings.ReplaceAll(v.Value, ",", " "))
			case yaml.SequenceNode:
				for _, t := range v.Content {
					if t.Kind != yaml.ScalarNode {
						bad(t.Line+1, k.Value, "want tool names")
						continue
					}
					p.AllowedTools = append(p.AllowedTools, t.Value)
				}
			default:
				bad(v.Line+1, k.Value, "want tool names separated by spaces, or a list")
			}
		case "metadata":
			if v.Kind != yaml.MappingNode {
				bad(v.Line+1, k.Value, "want key: value pairs")
				continue
			}
			p.Metadata = map[string]string{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				mk, mv := v.Content[j], v.Content[j+1]
				if mv.Kind != yaml.ScalarNode {
					bad(mv.Line+1, "metadata."+mk.Value, "want text")
					continue
				}
				p.Metadata[mk.Value] = mv.Value
			}
		default:
			hint := ""
			if s := suggest.Nearest(k.Value, knownKeys); s != "" {
				hint = fmt.Sprintf("did you mean %q? ", s)
			}
			bad(line, k.Value, "unknown key (%sknown: %s; put other properties under metadata:)", hint, strings.Join(knownKeys, ", "))
		}
	}

	switch {
	case seen["name"] == 0:
		bad(2, "name", "required: the skill's name, equal to its folder's")
	case failed["name"]:
	case p.Name == "":
		bad(seen["name"], "name", "is empty: want the skill's name, equal to its folder's")
	default:
		if err := api.ValidateSkillName(p.Name); err != nil {
			bad(p.nameLine, "name", "%v", err)
		}
	}
	switch n := utf8.RuneCountInString(p.Description); {
	case seen["description"] == 0:
		bad(2, "description", "required: say what the skill does and when to use it")
	case failed["description"]:
	case n == 0:
		bad(seen["description"], "description", "is empty: say what the skill does and when to use it")
	case n > MaxDescription:
		bad(seen["description"], "description", "is %d characters; keep it under %d", n, MaxDescription)
	}
	if n := utf8.RuneCountInString(p.Compatibility); n > MaxCompatibility {
		bad(seen["compatibility"], "compatibility", "is %d characters; keep it under %d", n, MaxCompatibility)
	}
	if p.Body == "" {
		bad(end+1, "body", "is empty: write the skill's instructions below the front matter")
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].(*Error).Line < errs[j].(*Error).Line })
	return p, errs
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// shiftLines turns the YAML parser's front-matter line numbers into file line numbers.
func shiftLines(msg string) string {
	return yamlLine.ReplaceAllStringFunc(msg, func(s string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
		return "line " + strconv.Itoa(n+1)
	})
}
