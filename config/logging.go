package config

import (
	"io"
	"log/slog"
	"strings"
)

// SlogLevel is Log.Level as a slog.Level; an unknown level (which Validate rejects) is
// slog.LevelInfo.
func (c Config) SlogLevel() slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.TrimSpace(c.Log.Level))); err != nil {
		return slog.LevelInfo
	}
	return level
}

// NewLogger returns a logger writing to w in Log.Format (text unless "json") at
// SlogLevel. Binaries call it once and pass the logger down; this package never logs.
func (c Config) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if strings.EqualFold(c.Log.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
