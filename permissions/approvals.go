package permissions

import (
	"cmp"
	"slices"
)

// Grant names what a remembered human decision covers: every call of one tool with one
// capability, for the rest of the run.
type Grant struct {
	Capability Capability `json:"capability"`
	Tool       string     `json:"tool"`
}

// Approvals is what humans have decided in this run that outlives a single call: tools
// approved "always" and tools refused "never" (an api.ApprovalSignal with Always set). The
// workflow keeps it in its run state and passes it to every Decide; it survives
// continue-as-new and replays identically (plain sorted slices, no maps).
//
// A one-off approval is not recorded here: the caller runs the approved pending call
// without deciding it again.
//
// Approvals is a value: Remember returns a new one and never modifies the receiver or its
// backing arrays, so a copy held elsewhere (a history, a test) stays as it was. The zero
// value holds no decisions.
type Approvals struct {
	// Always lists tools a human approved for the rest of the run, sorted.
	Always []Grant `json:"always,omitempty"`
	// Never lists tools a human refused for the rest of the run, sorted. A refusal wins
	// over approve_when rules; it does not override allow or mcp_allow (which never ask).
	Never []Grant `json:"never,omitempty"`
}

// Remember returns a copy of a that records the human's decision for c's tool: approved
// adds it to Always, otherwise to Never; the latest decision replaces an earlier opposite
// one.
func (a Approvals) Remember(c Call, approved bool) Approvals {
	g := Grant{Capability: c.Capability, Tool: c.Tool}
	always, never := without(a.Always, g), without(a.Never, g)
	if approved {
		always = insertSorted(always, g)
	} else {
		never = insertSorted(never, g)
	}
	return Approvals{Always: always, Never: never}
}

// lookup reports whether a decision is remembered for c's tool, and which.
func (a Approvals) lookup(c Call) (approved, found bool) {
	g := Grant{Capability: c.Capability, Tool: c.Tool}
	if slices.Contains(a.Never, g) {
		return false, true
	}
	if slices.Contains(a.Always, g) {
		return true, true
	}
	return false, false
}

func compareGrants(x, y Grant) int {
	return cmp.Or(cmp.Compare(x.Capability, y.Capability), cmp.Compare(x.Tool, y.Tool))
}

// without returns a fresh slice of gs minus g (nil when empty).
func without(gs []Grant, g Grant) []Grant {
	var out []Grant
	for _, x := range gs {
		if x != g {
			out = append(out, x)
		}
	}
	return out
}

// insertSorted inserts g into the fresh slice gs, keeping it sorted; gs is owned.
func insertSorted(gs []Grant, g Grant) []Grant {
	i, _ := slices.BinarySearchFunc(gs, g, compareGrants)
	return slices.Insert(gs, i, g)
}
