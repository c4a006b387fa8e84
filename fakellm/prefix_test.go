package fakellm_test

import (
	"testing"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/fakellm"
)

// The fake stays on the standard library, so it spells the worker's compaction prefix
// itself; this keeps the two equal.
func TestCompactPrefixIsTheWorkers(t *testing.T) {
	if fakellm.CompactPrefix != activities.CompactPromptPrefix {
		t.Errorf("fakellm.CompactPrefix = %q, activities.CompactPromptPrefix = %q", fakellm.CompactPrefix, activities.CompactPromptPrefix)
	}
}
