package devserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestHistoryPageWarningIsDebug: the frontend's warning for the Web UI's large history
// pages does not reach a worker terminal at the usual levels; other warnings do.
func TestHistoryPageWarningIsDebug(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool // the page-size message is shown
	}{{slog.LevelInfo, false}, {slog.LevelWarn, false}, {slog.LevelDebug, true}} {
		var buf bytes.Buffer
		l := serverLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})), gate: &logGate{base: tc.level}}
		l.Warn(historyPageWarning)
		l.Warn("persistence is slow")
		out := buf.String()
		if got := strings.Contains(out, historyPageWarning); got != tc.want {
			t.Errorf("level %v: page-size message shown = %v, want %v:\n%s", tc.level, got, tc.want, out)
		}
		if !strings.Contains(out, "persistence is slow") || !strings.Contains(out, "level=WARN") {
			t.Errorf("level %v: another warning is not shown as a warning:\n%s", tc.level, out)
		}
	}
}
