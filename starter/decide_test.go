package main

import (
	"bytes"
	"context"
	"errors"
	"os/user"
	"strings"
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

// TestEditAndAnswerUsage: an edit that is not a JSON object, an edit remembered with
// --always and an answer without a result are usage mistakes (exit 2) caught before any
// call to Temporal.
func TestEditAndAnswerUsage(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		err  string
	}{
		{[]string{"approve", "r1", "--args", "[1]"}, "starter approve: --args must be a JSON object (the call's edited arguments): [1]"},
		{[]string{"approve", "r1", "--args", "{nope"}, "starter approve: --args must be a JSON object (the call's edited arguments): {nope"},
		{[]string{"approve", "r1", "--args", `{"path":"a"}`, "--always"}, "starter approve: --always does not go with --args: it would approve later calls of the tool that nobody edited"},
		{[]string{"answer", "r1", "--call", "2.1"}, "starter answer: answer needs --result: the text the model gets instead of the tool's result"},
		{[]string{"answer", "r1", "--always"}, "starter answer: unknown flag --always"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.argv, &stdout, &stderr)
		if first, _, _ := strings.Cut(stderr.String(), "\n"); code != 2 || !strings.HasPrefix(first, tc.err) {
			t.Errorf("starter %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.argv, " "), code, stderr.String(), tc.err)
		}
	}
}
