package platform

import (
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/api"
)

func TestPeerDifferences(t *testing.T) {
	me := api.WorkerAnnouncement{Identity: "1@a@", Workflows: []string{"AgentRun", "DocumentApproval"}}
	worker := func(id string, agents ...string) api.RegisteredWorker {
		return api.RegisteredWorker{WorkerAnnouncement: api.WorkerAnnouncement{Identity: id, Agents: agents, Workflows: []string{"AgentRun", "DocumentApproval"}}}
	}
	tests := []struct {
		name    string
		workers []api.RegisteredWorker
		want    []string
	}{
		{"alone", []api.RegisteredWorker{worker("1@a@")}, nil},
		{"agree", []api.RegisteredWorker{worker("1@a@"), worker("2@b@")}, nil},
		{"others have agents", []api.RegisteredWorker{worker("1@a@"), worker("2@b@", "scribe"), worker("3@c@", "keeper", "scribe")},
			[]string{"other workers on task queue nexo offer agents keeper, scribe; this one offers none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := peerDifferences(api.RegistryView{Workers: tt.workers}, me, "nexo")
			if len(got) != len(tt.want) {
				t.Fatalf("lines = %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("line %d = %q, want it to start %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	mine := me
	mine.Agents, mine.Pools = []string{"trainer"}, map[string]string{"trainer": "gpu"}
	peer := worker("2@b@", "trainer")
	if got := peerDifferences(api.RegistryView{Workers: []api.RegisteredWorker{peer}}, mine, "nexo"); len(got) != 1 ||
		got[0] != "other workers on task queue nexo run agent trainer's tools on any host; this one on pool gpu (each run claims a host where the worker that resolved its agent says)" {
		t.Errorf("pool difference = %q", got)
	}
	peer.Pools = map[string]string{"trainer": "gpu"}
	if got := peerDifferences(api.RegistryView{Workers: []api.RegisteredWorker{peer}}, mine, "nexo"); len(got) != 0 {
		t.Errorf("workers that agree on the pool: %q", got)
	}
	other := worker("2@b@")
	other.Workflows = append(other.Workflows, "RefundRequest")
	got := peerDifferences(api.RegistryView{Workers: []api.RegisteredWorker{other}}, me, "nexo")
	if len(got) != 1 || !strings.Contains(got[0], "workflow types this one lacks: RefundRequest; this one adds: none") {
		t.Errorf("workflow type difference = %q", got)
	}
}
