package cli

import (
	"errors"
	"io"
	"runtime/debug"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlagError(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"--inptu", "{}"}, "unknown flag --inptu (did you mean --input?)"},
		{[]string{"--frobnicate"}, "unknown flag --frobnicate"},
		{[]string{"-input", "{}"}, "unknown flag -input (did you mean --input?)"},
		{[]string{"-x"}, "unknown flag -x in -x"},
		{[]string{"--limit", "many"}, `invalid argument "many" for "--limit" flag: strconv.ParseInt: parsing "many": invalid syntax`},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("input", "", "")
		fs.BoolP("follow", "f", false, "")
		fs.Int("limit", 0, "")
		err := fs.Parse(tc.argv)
		if err == nil {
			t.Fatalf("Parse(%q) succeeded", tc.argv)
		}
		if got := FlagError(fs, err).Error(); got != tc.want {
			t.Errorf("FlagError(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
	if err := errors.New("other"); FlagError(pflag.NewFlagSet("t", pflag.ContinueOnError), err) != err {
		t.Error("FlagError changed an error that is not about a flag")
	}
}

func TestVersion(t *testing.T) {
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "abc123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{rev}}, "v1.2.0"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev}}, "(devel) abc123"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev, dirty}}, "(devel) abc123 (modified)"},
		{debug.BuildInfo{}, "(devel)"},
	} {
		if got := version(&tc.bi); got != tc.want {
			t.Errorf("version(%+v) = %q, want %q", tc.bi.Main, got, tc.want)
		}
	}
}
