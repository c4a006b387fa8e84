package sandbox

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Defaults of TruncateOutput, from the reference (Nexo's OutputTruncator): what the shell
// tool shows the model of a command's stdout and stderr.
const (
	DefaultOutputLines = 200
	DefaultOutputChars = 16_000
)

// ansiEscape matches terminal escape sequences: CSI (colours, cursor movement: ESC [ … final),
// OSC (titles, hyperlinks: ESC ] … BEL or ESC \\), character-set designations (ESC ( B),
// two-byte escapes (ESC X), and a stray ESC. Nexo strips only colour codes; the other
// kinds are just as useless to a model.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]+[0-~]|\x1b[@-Z\\-_]|\x1b`)

// TruncateOutput prepares command output for the model: it strips ANSI escape sequences,
// replaces invalid UTF-8, renders carriage-return progress lines as a terminal would show
// them (only the text after the last "\r" of a line), then keeps the LAST maxLines lines
// and, of those, the last maxChars characters — the end of a log is where the error is. A
// first line "[truncated N lines]" (or "[truncated N lines, M chars]", "[truncated M
// chars]") says what was dropped; the result is at most maxChars characters plus that
// marker. maxLines or maxChars <= 0 mean DefaultOutputLines and DefaultOutputChars. Short
// output comes back unchanged apart from the cleaning.
func TruncateOutput(s string, maxLines, maxChars int) string {
	if maxLines <= 0 {
		maxLines = DefaultOutputLines
	}
	if maxChars <= 0 {
		maxChars = DefaultOutputChars
	}
	if s == "" {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiEscape.ReplaceAllString(s, "")
	}
	lines := strings.Split(s, "\n")
	if strings.IndexByte(s, '\r') >= 0 {
		for i, ln := range lines {
			ln = strings.TrimSuffix(ln, "\r")
			if j := strings.LastIndexByte(ln, '\r'); j >= 0 {
				ln = ln[j+1:]
			}
			lines[i] = ln
		}
	}
	droppedLines := 0
	if len(lines) > maxLines {
		droppedLines = len(lines) - maxLines
		lines = lines[droppedLines:]
	}
	out := strings.Join(lines, "\n")
	droppedChars := 0
	if n := utf8.RuneCountInString(out); n > maxChars {
		droppedChars = n - maxChars
		cut := 0
		for i := 0; i < droppedChars; i++ {
			_, size := utf8.DecodeRuneInString(out[cut:])
			cut += size
		}
		out = out[cut:]
	}
	switch {
	case droppedLines > 0 && droppedChars > 0:
		return fmt.Sprintf("[truncated %d lines, %d chars]\n", droppedLines, droppedChars) + out
	case droppedLines > 0:
		return fmt.Sprintf("[truncated %d lines]\n", droppedLines) + out
	case droppedChars > 0:
		return fmt.Sprintf("[truncated %d chars]\n", droppedChars) + out
	}
	return out
}
