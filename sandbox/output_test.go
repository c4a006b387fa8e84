package sandbox

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func numberedLines(n int, format string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestTruncateOutput(t *testing.T) {
	tests := []struct {
		name               string
		in                 string
		maxLines, maxChars int
		want               string   // exact, when set
		contains           []string // substrings the result must have
		absent             []string // substrings it must not have
		maxLen             int      // upper bound on characters, when set
	}{
		{name: "empty", in: "", want: ""},
		{name: "short unchanged", in: "hello\nworld\n", want: "hello\nworld\n"},
		{
			name:     "1000 coloured lines (reference)",
			in:       numberedLines(1000, "\x1b[31mline %d with colour\x1b[0m"),
			contains: []string{"truncated", "line 999 with colour"},
			absent:   []string{"\x1b", "line 799 with colour"},
			maxLen:   20_000,
		},
		{
			name:     "max 10 lines of 500 (reference)",
			in:       numberedLines(500, "line %d"),
			maxLines: 10,
			want:     "[truncated 490 lines]\n" + strings.TrimPrefix(numberedLines(500, "line %d"), numberedLines(490, "line %d")+"\n"),
		},
		{
			name:     "chars keep the tail",
			in:       strings.Repeat("x", 100) + "END",
			maxChars: 10,
			want:     "[truncated 93 chars]\nxxxxxxxEND",
		},
		{
			name:     "lines and chars",
			in:       numberedLines(300, "%04d"),
			maxChars: 14,
			want:     "[truncated 100 lines, 985 chars]\n0297\n0298\n0299",
		},
		{name: "cursor and OSC sequences", in: "\x1b[2K\x1b[1Gok \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b(Bdone\x1b", want: "ok link done"},
		{name: "carriage-return progress", in: "10%\r50%\r100%\ndone\r\n", want: "100%\ndone\n"},
		{name: "CRLF", in: "a\r\nb\r\n", want: "a\nb\n"},
		{name: "invalid UTF-8 replaced", in: "a\xffb", want: "a\uFFFDb"},
		{name: "runes, not bytes", in: strings.Repeat("é", 50), maxChars: 5, want: "[truncated 45 chars]\nééééé"},
		{name: "trailing newline counts as a line", in: "a\nb\nc\n", maxLines: 3, want: "[truncated 1 lines]\nb\nc\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TruncateOutput(tt.in, tt.maxLines, tt.maxChars)
			if tt.want != "" || tt.in == "" {
				if got != tt.want {
					t.Errorf("TruncateOutput = %q, want %q", got, tt.want)
				}
			}
			for _, c := range tt.contains {
				if !strings.Contains(got, c) {
					t.Errorf("result lacks %q", c)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("result has %q", a)
				}
			}
			if tt.maxLen > 0 && utf8.RuneCountInString(got) >= tt.maxLen {
				t.Errorf("result is %d chars, want under %d", utf8.RuneCountInString(got), tt.maxLen)
			}
			if !utf8.ValidString(got) {
				t.Errorf("result is not valid UTF-8")
			}
		})
	}
}

func TestTruncateOutputDefaults(t *testing.T) {
	got := TruncateOutput(numberedLines(1000, "%d"), 0, 0)
	if !strings.HasPrefix(got, fmt.Sprintf("[truncated %d lines]\n", 1000-DefaultOutputLines)) {
		t.Errorf("default lines: result starts %q", got[:40])
	}
	got = TruncateOutput(strings.Repeat("y", 20_000), 0, 0)
	if n := utf8.RuneCountInString(got); n > DefaultOutputChars+40 {
		t.Errorf("default chars: result is %d chars", n)
	}
}
