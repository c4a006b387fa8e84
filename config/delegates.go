package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nexo-temporal/nexo/agents"
)

// MaxDelegateDepth bounds an agent's max_depth: each level is a child run that may wait
// for its own approvals.
const MaxDelegateDepth = 10

// validateDelegates checks every agent's delegates: each names another agent of the
// config, none twice, and following them never leads back to an agent on the way (a
// cycle would delegate forever, bounded only by max_depth). A cycle is named by its path,
// "a -> b -> a", once, from the first agent of the config on it.
func (c Config) validateDelegates() []error {
	var errs []error
	byName := map[string]agents.Spec{}
	for _, ag := range c.Agents {
		byName[ag.Name] = ag
	}
	workerDepth := c.Worker.MaxDepth
	if workerDepth < 1 || workerDepth > MaxDelegateDepth {
		errs = append(errs, &FieldError{Field: "worker.max_depth", Value: workerDepth,
			Problem: fmt.Sprintf("want 1 to %d (default %d)", MaxDelegateDepth, agents.DefaultMaxDepth)})
		workerDepth = MaxDelegateDepth // the agents' own bound is still checked
	}
	for i, ag := range c.Agents {
		field := fmt.Sprintf("agents[%s]", orIndex(ag.Name, i))
		switch {
		case ag.MaxDepth < 0 || ag.MaxDepth > MaxDelegateDepth:
			errs = append(errs, &FieldError{Field: field + ".max_depth", Value: ag.MaxDepth,
				Problem: fmt.Sprintf("want 1 to %d (0 or unset: worker.max_depth, %d)", MaxDelegateDepth, c.Worker.MaxDepth)})
		case ag.MaxDepth > workerDepth:
			// The smaller wins (Worker.MaxDepth): an agent's deeper bound would be cut
			// silently, so it is refused where it is written.
			errs = append(errs, &FieldError{Field: field + ".max_depth", Value: ag.MaxDepth,
				Problem: fmt.Sprintf("is deeper than worker.max_depth %d allows (an agent may lower the worker's bound, not raise it): raise worker.max_depth or lower this", workerDepth)})
		}
		for j, d := range ag.Delegates {
			f := fmt.Sprintf("%s.delegates[%d]", field, j)
			switch _, ok := byName[d]; {
			case d == ag.Name:
				errs = append(errs, &FieldError{Field: f, Value: d, Problem: "an agent cannot delegate to itself (cycle " + d + " -> " + d + ")"})
			case !ok:
				errs = append(errs, &FieldError{Field: f, Value: d, Problem: "is not an agent of this config (agents: " + strings.Join(agentNames(c.Agents), ", ") + ")"})
			case slices.Index(ag.Delegates, d) < j:
				errs = append(errs, &FieldError{Field: f, Value: d, Problem: "named twice"})
			}
		}
	}
	reported := map[string]bool{} // a cycle's agents, sorted and joined: reported once
	for i, ag := range c.Agents {
		if path := delegateCycle(byName, []string{ag.Name}); path != nil {
			members := slices.Clone(path[:len(path)-1])
			slices.Sort(members)
			key := strings.Join(members, ",")
			if reported[key] {
				continue
			}
			reported[key] = true
			errs = append(errs, &FieldError{Field: fmt.Sprintf("agents[%s].delegates", orIndex(ag.Name, i)), Value: ag.Delegates,
				Problem: "delegate cycle " + strings.Join(path, " -> ") + " (an agent may not be reached again from its own delegates)"})
		}
	}
	return errs
}

// delegateCycle returns the path from path[0] back to itself through delegates, or nil.
// Self-delegation and unknown names are reported by validateDelegates and skipped here.
func delegateCycle(byName map[string]agents.Spec, path []string) []string {
	last := path[len(path)-1]
	for _, d := range byName[last].Delegates {
		if d == last {
			continue
		}
		if _, ok := byName[d]; !ok {
			continue
		}
		if d == path[0] {
			return append(slices.Clone(path), d)
		}
		if slices.Contains(path, d) {
			continue // a cycle that does not pass through path[0]: found from its own agents
		}
		if found := delegateCycle(byName, append(slices.Clone(path), d)); found != nil {
			return found
		}
	}
	return nil
}

func agentNames(specs []agents.Spec) []string {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}
