package devserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// nexusHTTPWarning starts the warning the frontend logs on every start when its HTTP API is
// off. The dev server leaves it off on purpose (nothing here uses Nexus or the HTTP API), so
// the warning is noise.
const nexusHTTPWarning = "HTTP API port has not been set"

// historyPageWarning is what the frontend warns each time a GetWorkflowExecutionHistory
// request asks for more than primitives.GetHistoryMaxPageSize (256) events a page; it
// then serves 256. The Temporal Web UI asks for more whenever it opens a run, so a dozen
// of these follow every click. The limit is a compile-time constant: no dynamic config
// raises it (limit.historyMaxPageSize is only the size for requests that give none),
// and the clamp loses nothing (the UI pages on). The message is logged at debug level.
const historyPageWarning = "GetHistory page size is larger than threshold"

// serverLogger bridges the Temporal server's tag-based logger onto log/slog. The slog logger it
// wraps already filters by level (see levelHandler), so the server's chatty Info lines cost only
// an Enabled check.
type serverLogger struct {
	log  *slog.Logger
	gate *logGate
}

var (
	_ log.Logger      = serverLogger{}
	_ log.WithLogger  = serverLogger{}
	_ log.SLogWrapper = serverLogger{}
)

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.emit(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.emit(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag) {
	if msg == historyPageWarning {
		l.emit(slog.LevelDebug, msg, tags)
		return
	}
	l.emit(slog.LevelWarn, msg, tags)
}
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// DPanic, Panic and Fatal are logged as errors: an embedded server must never take the host
// process down (the caller decides exit codes).
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }
func (l serverLogger) Panic(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l serverLogger) Fatal(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }

// With returns a logger with tags prepended, so the server's per-component loggers pay the
// attribute conversion once.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{log: slog.New(l.log.Handler().WithAttrs(tagsToAttrs(tags))), gate: l.gate}
}

// SLog returns the (level-filtered) slog logger, for server code that logs through slog.
func (l serverLogger) SLog() *slog.Logger { return l.log }

func (l serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) || strings.HasPrefix(msg, nexusHTTPWarning) {
		return
	}
	if l.gate.state.Load() == gateStopping && anyCanceled(tags) {
		// Stop cancels the server's own in-flight calls (long polls between services); the
		// errors it logs for them are the shutdown itself, not news.
		return
	}
	l.log.LogAttrs(ctx, level, msg, tagsToAttrs(tags)...)
}

// anyCanceled reports whether a tag carries a context.Canceled error, or an error message
// that says so (errors that crossed gRPC are only text).
func anyCanceled(tags []tag.Tag) bool {
	for _, t := range tags {
		switch v := t.Value().(type) {
		case error:
			if errors.Is(v, context.Canceled) || strings.Contains(v.Error(), context.Canceled.Error()) {
				return true
			}
		case string:
			if strings.Contains(v, context.Canceled.Error()) {
				return true
			}
		}
	}
	return false
}

func tagsToAttrs(tags []tag.Tag) []slog.Attr {
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		attrs[i] = slog.Any(t.Key(), t.Value())
	}
	return attrs
}

// levelHandler drops records below min before they reach the wrapped handler, whatever level
// that handler itself accepts.
type levelHandler struct {
	min slog.Leveler
	h   slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min.Level() && h.h.Enabled(ctx, level)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error { return h.h.Handle(ctx, r) }

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{min: h.min, h: h.h.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{min: h.min, h: h.h.WithGroup(name)}
}

// logGate is the minimum level of a server's logs over its life: the caller's level while it
// runs; errors only while it stops (shutdown produces a burst of expected warnings about
// closed connections); nothing once stopped. The server v1.32 worker service leaves some of
// its internal SDK workers (scanners, parent-close-policy) polling after Stop, and their
// retries against the closed port would otherwise log forever.
type logGate struct {
	base  slog.Leveler
	state atomic.Int32 // gateRunning, gateStopping or gateStopped
}

const (
	gateRunning int32 = iota
	gateStopping
	gateStopped
)

// Level implements slog.Leveler.
func (g *logGate) Level() slog.Level {
	switch g.state.Load() {
	case gateStopping:
		return max(g.base.Level(), slog.LevelError)
	case gateStopped:
		return slog.Level(1 << 30)
	default:
		return g.base.Level()
	}
}
