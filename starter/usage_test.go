package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

func TestParseRaise(t *testing.T) {
	for in, want := range map[string]api.BudgetRaise{
		"+50000": {Tokens: 50000}, "+50k": {Tokens: 50000}, "+1.5M": {Tokens: 1_500_000},
		"+$2.50": {Cost: 2.5}, " +1000 ": {Tokens: 1000},
	} {
		got, err := parseRaise(in)
		if err != nil || *got != want {
			t.Errorf("parseRaise(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	// Hardening round two, item 1: 2^63-1 tokens overflowed the bound, and "+5,+5" was +10.
	for _, bad := range []string{"", "+0", "-5", "lots", "+$-1", "+$", "50k", "+5,+5", "+50k,+$1", "++5",
		"+9223372036854775807", "+1000001k", "+$1e300", "+$NaN", "+$Inf"} {
		if _, err := parseRaise(bad); err == nil || !strings.Contains(err.Error(), "raise") {
			t.Errorf("parseRaise(%q) = %v, want an error naming the raise", bad, err)
		}
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-30T09:00:00Z": time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"":                     {},
	} {
		if got, err := parseWhen(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseWhen("yesterday", now); err == nil || !strings.Contains(err.Error(), `"yesterday" is not a time`) {
		t.Errorf("parseWhen(yesterday) = %v", err)
	}
}
