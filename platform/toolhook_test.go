package platform

import (
	"context"
	"strings"
	"testing"

	"github.com/nexo-temporal/nexo/agents"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
)

func passHook() Hook {
	return Hook{Before: func(context.Context, HookCall) (HookDecision, error) { return HookDecision{}, nil }}
}

// TestNewRefusesUnregisteredToolHook: an agent naming a hook no option registers stops
// the worker at start, naming the agent, the hook and what is registered.
func TestNewRefusesUnregisteredToolHook(t *testing.T) {
	cfg := config.Config{Agents: []agents.Spec{{Name: "writer", ToolHooks: []string{"audit", "guard"}}}}
	_, err := New(cfg, ToolHook("audit", passHook()))
	want := `agents[writer].tool_hooks[1]: no tool hook "guard" is registered on this worker (registered: audit)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: err = %v, want one containing %q", err, want)
	}
	if strings.Contains(err.Error(), `"audit"`) {
		t.Errorf("New: err = %v also refuses the registered hook audit", err)
	}
	if _, err := New(cfg, ToolHook("audit", passHook()), ToolHook("guard", passHook())); err != nil {
		t.Errorf("New with both hooks: %v", err)
	}
}

func TestToolHookRefusesBadRegistrations(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"empty name", []Option{ToolHook(" ", passHook())}, "platform.ToolHook: the hook name is empty"},
		{"no functions", []Option{ToolHook("idle", Hook{})}, "platform.ToolHook idle: neither Before nor After is set"},
		{"twice", []Option{ToolHook("audit", passHook()), ToolHook("audit", passHook())}, "platform.ToolHook audit: registered twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(config.Config{}, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestNewRefusesUnregisteredLoop: an agent naming a Go loop no WithLoop registers stops
// the worker at start, naming the agent.
func TestNewRefusesUnregisteredLoop(t *testing.T) {
	cfg := config.Config{Agents: []agents.Spec{{Name: "planner", Loop: &api.LoopSpec{Type: api.LoopGo, Name: "graph"}}}}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), `agents[planner].loop.name: no Go loop "graph" is registered on this worker (registered: none)`) {
		t.Fatalf("New = %v", err)
	}
	step := LoopFunc(func(context.Context, LoopRequest) (LoopStep, error) { return LoopStep{Final: true}, nil })
	if _, err := New(cfg, WithLoop("graph", step)); err != nil {
		t.Errorf("New with the loop: %v", err)
	}
	if _, err := New(cfg, WithLoop("graph", step), WithLoop("graph", step)); err == nil || !strings.Contains(err.Error(), "platform.WithLoop graph: registered twice") {
		t.Errorf("twice: %v", err)
	}
}
