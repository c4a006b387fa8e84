package activities

import (
	"context"

	"github.com/nexo-temporal/nexo/api"
)

// LiveTail exposes liveTail.
func LiveTail(call, text string) api.LiveText { return liveTail(call, text) }

// LiveSnapshot exposes liveSnapshot.
func LiveSnapshot(call, text, thinking string) api.LiveText {
	return liveSnapshot(call, text, thinking)
}

// SetSignalStream replaces, on a's model calls, what a call streamed by signal sends for
// each StreamTo chunk.
func SetSignalStream(a *Activities, signal func(ctx context.Context, workflowID string, chunk api.StreamChunk) error) {
	a.Model.signalStream = signal
}
