package activities

import (
	"context"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// LiveTail exposes liveTail.
func LiveTail(call, text string) api.LiveText { return liveTail(call, text) }

// LiveSnapshot exposes liveSnapshot.
func LiveSnapshot(call, text, thinking string) api.LiveText {
	return liveSnapshot(call, text, thinking)
}

// WatchStreaming replaces, for one test, what a streaming model call sends: heartbeat
// (every RecordHeartbeat call, before the SDK's throttle) and signal (every StreamTo
// chunk). keepAlive shortens the keep-alive interval of activities without a heartbeat
// timeout (the test environment sets none).
func WatchStreaming(t *testing.T, keepAlive time.Duration,
	heartbeat func(ctx context.Context, details ...any),
	signal func(ctx context.Context, workflowID string, chunk api.StreamChunk) error) {
	oldBeat, oldSignal, oldEvery := recordHeartbeat, signalStream, heartbeatEvery
	recordHeartbeat, signalStream, heartbeatEvery = heartbeat, signal, keepAlive
	t.Cleanup(func() { recordHeartbeat, signalStream, heartbeatEvery = oldBeat, oldSignal, oldEvery })
}
