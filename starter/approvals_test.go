package main

import (
	"testing"
	"time"
)

func TestExpiryCell(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 8, 55, 0, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		name      string
		at        *time.Time
		on        string
		escalated bool
		want      string
	}{
		{"no deadline", nil, "", false, ""},
		{"pending, in UTC", &at, "deny", false, "2026-12-01T13:08:55Z (deny)"},
		{"escalated", nil, "escalate", true, "escalated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := expiryCell(tt.at, tt.on, tt.escalated); got != tt.want {
				t.Errorf("expiryCell = %q, want %q", got, tt.want)
			}
		})
	}
}
