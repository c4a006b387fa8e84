package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// readmeBlockCommands returns the `bin/starter` commands of the README's first ```sh
// block that contains marker, each split into arguments as a shell would (single and
// double quotes, a trailing `# comment` dropped), without the leading bin/starter. A test
// runs them as printed, so the README cannot drift from what works.
func readmeBlockCommands(t *testing.T, marker string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range strings.Split(readmeBlock(t, "sh", marker), "\n") {
		words := shellWords(t, line)
		if len(words) > 0 && words[0] == "bin/starter" {
			cmds = append(cmds, words[1:])
		}
	}
	return cmds
}

// readmeBlock returns the first fenced block of language lang (```yaml, ```sh) in the
// README that contains marker.
func readmeBlock(t *testing.T, lang, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	for _, block := range strings.Split(string(b), "```"+lang+"\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("README has no ```%s block containing %q", lang, marker)
	return ""
}

// shellWords splits line into words with sh's quoting rules for ' and ", and drops a
// comment that starts a word.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("README line has an unclosed %c: %s", quote, line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// substitute replaces the README's placeholders (<id>, <new-id>) in args.
func substitute(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, k, v)
		}
		out[i] = a
	}
	return out
}

func TestShellWords(t *testing.T) {
	got := shellWords(t, `bin/starter run X --input '{"a":["b c"]}' --wait   # fails "here"`)
	want := []string{"bin/starter", "run", "X", "--input", `{"a":["b c"]}`, "--wait"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellWords = %q, want %q", got, want)
	}
}
