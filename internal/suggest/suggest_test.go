package suggest

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"temporal.address", "log.level", "description", "name"}
	for _, tc := range []struct{ in, want string }{
		{"temporal.adress", "temporal.address"},
		{"log.levl", "log.level"},
		{"descripton", "description"},
		{"nam", "name"},
		{"colour", ""},
	} {
		if got := Nearest(tc.in, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestNearestTransposition: two swapped letters are one slip, so short names still get a
// suggestion (`starter lsit`, `--inptu`), and a real difference does not.
func TestNearestTransposition(t *testing.T) {
	known := []string{"list", "logs", "input", "id", "show"}
	for _, tc := range []struct{ in, want string }{
		{"lsit", "list"},
		{"inptu", "input"},
		{"shwo", "show"},
		{"lgos", "logs"},
		{"tsil", ""},
		{"xyz", ""},
	} {
		if got := Nearest(tc.in, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
