package activities

import (
	"context"
	"reflect"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeatEvery is how often a long activity without a heartbeat timeout tells Temporal
// it is alive (a beat also brings a cancellation back). With a heartbeat timeout, the
// activity beats every half of it (keepAliveEvery), so a call in flight on a worker that
// was killed is retried on another within seconds instead of after its start-to-close
// timeout.
var heartbeatEvery = 2 * time.Second

// HeartbeatThrottle is the WorkerOptions.MaxHeartbeatThrottleInterval of every worker that
// runs these activities. The SDK sends at most one heartbeat per throttle interval (0.8×
// the heartbeat timeout unless capped here: 8 s for a model call), and a streaming model
// call publishes its text so far as heartbeat details for live viewers, who must see it
// within a fraction of a second. Keep-alive beats come every half heartbeat timeout
// (keepAliveEvery), so the cap leaves other activities at one heartbeat per 5 s for a 10 s
// timeout (one per 8 s before: the default throttle folded the old 2 s beats).
const HeartbeatThrottle = 200 * time.Millisecond

// recordHeartbeat is activity.RecordHeartbeat; the tests replace it to see every beat
// (the SDK's test environment sends one per 30 s window).
var recordHeartbeat = activity.RecordHeartbeat

// beat is the heartbeat of one activity attempt. The server keeps only the details of the
// last heartbeat (one without details clears them), so every beat of an attempt that
// publishes details goes through its beat: keep-alive beats resend the last details
// instead of clearing them.
type beat struct {
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
		recordHeartbeat(ctx)
		return
	}
	recordHeartbeat(ctx, b.details)
}

// beats holds the beat of each activity attempt being kept alive, by task token (unique
// per attempt), so publishHeartbeat finds the keep-alive of the attempt it runs in.
var beats sync.Map // string → *beat

// keepAliveEvery is the keep-alive interval of the attempt: half its heartbeat timeout,
// or heartbeatEvery when it has none.
func keepAliveEvery(ctx context.Context) time.Duration {
	if t := activity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
		return t / 2
	}
	return heartbeatEvery
}

// keepAlive heartbeats until the returned stop is called or ctx ends. An attempt that
// is kept alive already keeps its one keep-alive (stop is then a no-op).
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	key := string(activity.GetInfo(ctx).TaskToken)
	b := &beat{}
	if _, loaded := beats.LoadOrStore(key, b); loaded {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	every := keepAliveEvery(ctx)
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
	// stop returns once the keep-alive has ended: no beat is sent after it (nor after the
	// attempt it kept alive returned).
	return func() {
		close(done)
		<-exited
		beats.CompareAndDelete(key, b)
	}
}

// publishHeartbeat records details as the attempt's heartbeat details: sent at once (the
// SDK throttles, see HeartbeatThrottle), and resent by the attempt's keep-alive beats.
// Outside an activity it does nothing.
func publishHeartbeat(ctx context.Context, details any) {
	if !activity.IsActivity(ctx) || details == nil {
		return
	}
	if b, ok := beats.Load(string(activity.GetInfo(ctx).TaskToken)); ok {
		b.(*beat).send(ctx, details)
		return
	}
	recordHeartbeat(ctx, details) // no keep-alive runs that could clear them
}

// keepAliveRegistry registers every activity wrapped in keepAlive, so each one heartbeats
// while it runs, whatever it does: the workflows give every activity a heartbeat timeout,
// and an attempt in flight on a worker that was killed is then retried elsewhere within
// seconds, not after its start-to-close timeout (minutes). An activity that keeps its own
// keep-alive (a model call publishing details) shares this one.
type keepAliveRegistry struct{ r Registry }

// KeepAlive returns r with every activity function registered through it kept alive by
// heartbeats as Register's own are, for a worker's other activities (a user's, through
// platform.Activity): the workflows give them the same heartbeat timeout.
func KeepAlive(r Registry) Registry { return keepAliveRegistry{r} }

var contextType = reflect.TypeFor[context.Context]()

func (k keepAliveRegistry) RegisterActivityWithOptions(fn any, o activity.RegisterOptions) {
	k.r.RegisterActivityWithOptions(withKeepAlive(fn), o)
}

// withKeepAlive wraps an activity function whose first argument is its context.
func withKeepAlive(fn any) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func || t.NumIn() == 0 || t.In(0) != contextType {
		return fn
	}
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		if ctx, ok := args[0].Interface().(context.Context); ok && ctx != nil {
			defer keepAlive(ctx)()
		}
		if t.IsVariadic() {
			return v.CallSlice(args)
		}
		return v.Call(args)
	}).Interface()
}
