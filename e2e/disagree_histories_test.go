package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/fakellm"
)

// recordAgentUnavailable (version 1 of "agent-unavailable"): a scribe run that first met
// a worker without the agent (agent_unavailable, a timer) and then ran on the worker that
// has it.
func recordAgentUnavailable(t *testing.T, r *recorder) {
	model := fakellm.New(fakellm.Reply{Content: "Hello from scribe.", Match: "Say hello"})
	p := newPlatform(t)
	p.writeConfig(historyAgentConfig(model.Start(t)))
	p.start()
	bare := newPlatform(t)
	bare.frontend, bare.plain = p.frontend, true
	bare.extraEnv = []string{"NEXO_ARTIFACTS_URL=file://" + p.artifactsDir()}
	bare.start()
	c := p.dial()
	for n := 1; n <= 16; n++ {
		id := p.startAgent(fmt.Sprintf("Say hello (%d).", n))
		if rec := waitDone(t, p, id, 3*time.Minute); countEvents(rec, "agent_unavailable") == 1 {
			r.save(c, "agent_unavailable_then_done.json", id, "")
			return
		}
	}
	t.Fatal("no run met the worker without the agent in 16 runs")
}
