package api

import (
	"strings"
	"testing"
)

func TestValidateRunID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // "" = valid; else a part of the error
	}{
		{"d1", ""},
		{"0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", ""},
		{"report 2026-01 (final)", ""},
		{strings.Repeat("x", MaxRunIDLength), ""},
		{"", "empty"},
		{"   ", "empty"},
		{".", `"."`},
		{"..", `"."`},
		{"a/b", "'/'"},
		{`a\b`, "'/'"},
		{"a?b", "'/'"},
		{"a%2Fb", "'/'"},
		{" a", "spaces at the ends"},
		{"a\nb", "control characters"},
		{strings.Repeat("x", 300), "300 bytes"},
		{"session:agent:victim", "reserved for sessions"},
		{"nexo-registry:nexo", "reserved for the task queues' worker registries"},
		{"nexo-tokens:nexo:small", "reserved for the endpoints' token limiters"},
		{"nexo-schedule:nightly-2026-12-06T02:00:00Z", "reserved for the runs of schedules"},
		{"nexo-notify:nexo:0123456789abcdef", "reserved for the receivers' notifiers"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			err := ValidateRunID(tc.id)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ValidateRunID(%q) = %v, want nil", tc.id, err)
			case tc.want != "" && err == nil:
				t.Fatalf("ValidateRunID(%q) = nil, want an error mentioning %q", tc.id, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("ValidateRunID(%q) = %v, want it to mention %q", tc.id, err, tc.want)
			}
		})
	}
}

func TestValidateScheduleName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" = valid; else a part of the error
	}{
		{"nightly", ""},
		{"Report.v2_daily-1", ""},
		{"7am", ""},
		{strings.Repeat("x", MaxScheduleNameLength), ""},
		{"", "empty"},
		{"-x", "starting with a letter or digit"},
		{"a b", "letters, digits"},
		{"a/b", "letters, digits"},
		{"a:b", "letters, digits"},
		{"é", "letters, digits"},
		{strings.Repeat("x", MaxScheduleNameLength+1), "101 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateScheduleName(tc.name)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ValidateScheduleName(%q) = %v, want nil", tc.name, err)
			case tc.want != "" && err == nil:
				t.Fatalf("ValidateScheduleName(%q) = nil, want an error mentioning %q", tc.name, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("ValidateScheduleName(%q) = %v, want it to mention %q", tc.name, err, tc.want)
			}
		})
	}
}
