package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeatEvery is how often a long activity tells Temporal it is alive. The workflows
// set a heartbeat timeout a few times longer, so a call in flight on a worker that was
// killed is retried on another within seconds instead of after its start-to-close timeout.
const heartbeatEvery = 2 * time.Second

// keepAlive heartbeats until the returned stop is called or ctx ends.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done) }
}
