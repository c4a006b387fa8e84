package main

import (
	"errors"
	"os/user"
	"testing"
)

func TestOSUser(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "USER" {
				return v
			}
			return ""
		}
	}
	found := func() (*user.User, error) { return &user.User{Username: "ada"}, nil }
	missing := func() (*user.User, error) { return nil, errors.New("no passwd entry") }
	for _, tc := range []struct {
		name    string
		current func() (*user.User, error)
		user    string
		want    string
	}{
		{"os user wins", found, "bob", "ada"},
		{"falls back to $USER", missing, "bob", "bob"},
		{"nothing known", missing, "", ""},
	} {
		if got := osUser(tc.current, env(tc.user)); got != tc.want {
			t.Errorf("%s: osUser = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestByDefaultsToTheOSUser: approve and deny record the OS user when --by is not given.
func TestByDefaultsToTheOSUser(t *testing.T) {
	want := osUser(user.Current, func(string) string { return "" })
	if want == "" {
		t.Skip("this machine names no OS user")
	}
	for _, c := range []*command{approveCmd(), denyCmd()} {
		fs := newFlagSet(c)
		if err := fs.Parse([]string{"r1"}); err != nil {
			t.Fatal(err)
		}
		if by, _ := fs.GetString("by"); by != want {
			t.Errorf("%s: --by defaults to %q, want the OS user %q", c.name, by, want)
		}
		fs = newFlagSet(c)
		_ = fs.Parse([]string{"r1", "--by", "grace"})
		if by, _ := fs.GetString("by"); by != "grace" {
			t.Errorf("%s --by grace: got %q", c.name, by)
		}
	}
}
