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
