package activities

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/nexo-temporal/nexo/api"
)

// A worker keeps its host id across restarts on one sandbox root; a second process on the
// same root while the first runs gets another id; a different root is another host.
func TestHostIDSurvivesRestartAndIsNotShared(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	id1, release1, err := HostID(root)
	if err != nil || !validHostID(id1) {
		t.Fatalf("HostID = %q, %v", id1, err)
	}
	id2, release2, err := HostID(root)
	if err != nil || id2 == id1 {
		t.Errorf("a second process on a held root got %q (first %q), %v; want an id of its own", id2, id1, err)
	}
	release2()
	release1()
	again, release, err := HostID(root)
	if err != nil || again != id1 {
		t.Errorf("after a restart HostID = %q, want %q (%v)", again, id1, err)
	}
	release()
	other, release, err := HostID(t.TempDir())
	if err != nil || other == id1 {
		t.Errorf("another root's id = %q, want a new one (%v)", other, err)
	}
	release()
}

// nameRegistry records the activity names registered on it.
type nameRegistry struct{ names []string }

func (r *nameRegistry) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	r.names = append(r.names, o.Name)
}

// A sandbox host registers what a run sends to its host queue (every tool, file, skill,
// snapshot and restore activity) and nothing of the model, MCP or agent resolution, so it
// needs none of their configuration; the pool's claim queue gets the claim alone.
func TestSandboxHostRegistersOnlySandboxActivities(t *testing.T) {
	t.Parallel()
	a := New(Deps{})
	var r nameRegistry
	a.RegisterSandbox(&r)
	for _, want := range []string{api.ActivityRunTool, api.ActivityWriteArtifact, api.ActivityStageFiles, api.ActivityCollectOutputs,
		api.ActivityReleaseSandbox, api.ActivityRestoreArtifacts, api.ActivityMaterializeSkills, api.ActivityProbeSandbox,
		api.ActivitySnapshotSandbox, api.ActivityRestoreSandboxOnHost, api.ActivityParkSandbox} {
		if !slices.Contains(r.names, want) {
			t.Errorf("sandbox host lacks %s (registered %v)", want, r.names)
		}
	}
	for _, not := range []string{api.ActivityCompleteChat, api.ActivityCompactThread, api.ActivityCallMCPTool, api.ActivityListMCPTools,
		api.ActivityResolveAgent, api.ActivityClaimSandboxHost, api.ActivityNotifyApproval} {
		if slices.Contains(r.names, not) {
			t.Errorf("sandbox host registers %s", not)
		}
	}
	var claim nameRegistry
	a.Host.RegisterClaim(&claim)
	if len(claim.names) != 1 || claim.names[0] != api.ActivityClaimSandboxHost {
		t.Errorf("claim queue registers %v, want %s alone", claim.names, api.ActivityClaimSandboxHost)
	}
}
