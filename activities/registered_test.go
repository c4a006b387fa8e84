package activities_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/activities"
)

var updateGolden = flag.Bool("update-registered", false, "rewrite testdata/registered_activities.golden")

// nameRegistry records the activity names registered on it.
type nameRegistry struct{ names []string }

func (n *nameRegistry) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.names = append(n.names, o.Name)
}

// TestRegisteredActivityNames: every task queue a worker polls gets exactly the activity
// names it got before the activities became providers (the golden file was taken from
// the single Activities struct's Register, RegisterSandbox, RegisterClaim and
// RegisterModel). Workflows schedule activities by these names and recorded histories
// carry them, so a name that moves, disappears or appears on another queue breaks runs.
func TestRegisteredActivityNames(t *testing.T) {
	t.Parallel()
	a := activities.New(activities.Deps{})
	var b strings.Builder
	for _, q := range []struct {
		queue    string
		register func(activities.Registry)
	}{
		{"shared task queue", a.Register},
		{"host queue", a.RegisterSandbox},
		{"pool claim queue", a.Host.RegisterClaim},
		{"model queue", a.Model.RegisterCalls},
	} {
		var r nameRegistry
		q.register(&r)
		slices.Sort(r.names)
		fmt.Fprintf(&b, "%s: %s\n", q.queue, strings.Join(r.names, " "))
	}
	path := filepath.Join("testdata", "registered_activities.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("registered activity names changed:\ngot:\n%s\nwant (%s):\n%s", got, path, want)
	}
}
