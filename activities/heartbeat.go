package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// HeartbeatThrottle is the WorkerOptions.MaxHeartbeatThrottleInterval of every worker that
// runs these activities. A streaming model call publishes its text so far as heartbeat
// details for live viewers, who must see it within a fraction of a second, and the SDK
// would otherwise send at most one heartbeat per 0.8× the heartbeat timeout (8 s for a
// model call).
//
// The SDK takes this cap per worker only: each attempt's throttle is computed from it and
// the attempt's heartbeat timeout (sdk internal getHeartbeatThrottleInterval), with no
// per-activity override, and a model call runs on the same task queues (so the same
// workers) as every other activity, since a task queue cannot route by activity type. The
// cap costs the other activities nothing: a throttle is the least spacing of the
// heartbeats an attempt records, it sends none of its own, and the other activities
// record one every half heartbeat timeout (KeepAlive), 5 s for a 10 s timeout. Only the
// streaming call records faster, so only it sends up to one heartbeat per 200 ms.
const HeartbeatThrottle = 200 * time.Millisecond

// KeepAlive is the activity inbound interceptor (go.temporal.io/sdk/interceptor) that
// keeps every attempt with a heartbeat timeout alive while it runs, whatever its code
// does: it heartbeats every half of that timeout, so an attempt in flight on a worker that
// was killed is retried elsewhere within seconds, not after its start-to-close timeout
// (minutes). The workflows give every activity a heartbeat timeout, the shipped ones and a
// user's (platform.Activity) alike; an attempt without one is not beaten for (nothing
// times it out by heartbeat) unless Every is set.
//
// Put one in worker.Options.Interceptors of every worker that runs activities. The zero
// value is ready; one KeepAlive serves any number of workers and attempts.
type KeepAlive struct {
	interceptor.WorkerInterceptorBase
	// Every is the keep-alive interval of an attempt without a heartbeat timeout; 0 (the
	// default) leaves such an attempt alone. The SDK's test environment schedules
	// activities without one, so tests set it.
	Every time.Duration
	// Record records one heartbeat; nil means activity.RecordHeartbeat. Tests see every
	// beat through it (the SDK's test environment sends one per 30 s window).
	Record func(ctx context.Context, details ...any)
}

// InterceptActivity keeps the attempt that ctx is of alive while next runs it.
func (k *KeepAlive) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &keepAliveInbound{k: k}
	i.Next = next
	return i
}

type keepAliveInbound struct {
	interceptor.ActivityInboundInterceptorBase
	k *KeepAlive
}

func (i *keepAliveInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	every := i.k.Every
	if t := activity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
		every = t / 2
	}
	if every <= 0 {
		return i.Next.ExecuteActivity(ctx, in)
	}
	record := i.k.Record
	if record == nil {
		record = activity.RecordHeartbeat
	}
	b := &beat{record: record}
	ctx = context.WithValue(ctx, beatKey{}, b)
	defer b.keepAlive(ctx, every)()
	return i.Next.ExecuteActivity(ctx, in)
}

// beatKey is the context key of the attempt's beat.
type beatKey struct{}

// beat is the heartbeat of one activity attempt. The server keeps only the details of the
// last heartbeat (one without details clears them), so every beat of an attempt that
// publishes details goes through its beat: keep-alive beats resend the last details
// instead of clearing them.
type beat struct {
	record  func(ctx context.Context, details ...any)
	mu      sync.Mutex
	details any // nil: none published
}

// send records a heartbeat with details, or, for nil, with the last details published.
// The lock is held through the call so that two beats reach the SDK in the order their
// details were set (the newest always ends up on the server).
func (b *beat) send(ctx context.Context, details any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if details != nil {
		b.details = details
	}
	if b.details == nil {
		b.record(ctx)
		return
	}
	b.record(ctx, b.details)
}

// keepAlive heartbeats every interval until the returned stop is called or ctx ends.
// stop returns once the keep-alive has ended: no beat is sent after it (nor after the
// attempt it kept alive returned).
func (b *beat) keepAlive(ctx context.Context, every time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.send(ctx, nil)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// publishHeartbeat records details as the attempt's heartbeat details: sent at once (the
// SDK throttles, see HeartbeatThrottle), and resent by the attempt's keep-alive beats.
// Outside an activity it does nothing.
func publishHeartbeat(ctx context.Context, details any) {
	if !activity.IsActivity(ctx) || details == nil {
		return
	}
	if b, ok := ctx.Value(beatKey{}).(*beat); ok {
		b.send(ctx, details)
		return
	}
	activity.RecordHeartbeat(ctx, details) // no keep-alive runs that could clear them
}
