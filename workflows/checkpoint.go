package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// StepFunc is one unit of work for Step or CheckpointAll. It runs as workflow code, so its
// side effects must be activities (see Call).
type StepFunc func(ctx workflow.Context) (any, error)

// Call returns a StepFunc that runs the activity (a registered name or function) with args.
func Call(activity any, args ...any) StepFunc {
	return func(ctx workflow.Context) (any, error) {
		var out json.RawMessage
		if err := workflow.ExecuteActivity(ctx, activity, args...).Get(ctx, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Checkpoint runs the activity once per run and stores its JSON result under state[name];
// later calls with the same name, and re-runs seeded from a failed run, return the stored
// value without running it. The value returned the first time is the stored JSON decoded
// into T, so every call sees the same value.
func Checkpoint[T any](ctx workflow.Context, name string, activity any, args ...any) (T, error) {
	return Step(ctx, name, func(ctx workflow.Context) (T, error) {
		var out T
		err := workflow.ExecuteActivity(ctx, activity, args...).Get(ctx, &out)
		return out, err
	})
}

// Step is Checkpoint for any workflow code: fn runs once per run (it may emit events and
// run activities); its JSON result is stored under state[name] and returned.
func Step[T any](ctx workflow.Context, name string, fn func(ctx workflow.Context) (T, error)) (T, error) {
	var zero T
	rt, err := runtimeOf(ctx, "checkpoint "+name)
	if err != nil {
		return zero, err
	}
	if err := checkName(name); err != nil {
		return zero, err
	}
	if raw, ok := rt.rec.State[name]; ok {
		return decodeStored[T](name, raw)
	}
	v, err := fn(withDefaultOptions(ctx))
	if err != nil {
		return zero, &StepError{Name: name, Err: err}
	}
	raw, err := rt.store(ctx, name, v)
	if err != nil {
		return zero, err
	}
	return decodeStored[T](name, raw)
}

// withDefaultOptions gives ctx the run's default activity options when it has none: the
// context the SDK hands an update handler derives from its own root, not from the run's,
// so a checkpoint in a user's update handler would otherwise fail for want of a timeout.
func withDefaultOptions(ctx workflow.Context) workflow.Context {
	if o := workflow.GetActivityOptions(ctx); o.StartToCloseTimeout == 0 && o.ScheduleToCloseTimeout == 0 {
		return workflow.WithActivityOptions(ctx, DefaultActivityOptions())
	}
	return ctx
}

// store records a checkpoint's result under state[name] and emits its event.
func (rt *runtime) store(ctx workflow.Context, name string, v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint %s: result is not JSON: %v", name, err), api.ErrTypeBadInput, nil)
	}
	rt.rec.State[name] = raw
	rt.emit(ctx, "checkpoint", map[string]string{"name": name})
	return raw, nil
}

func decodeStored[T any](name string, raw json.RawMessage) (T, error) {
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint %s: stored value does not decode into %T: %v", name, out, err),
			api.ErrTypeBadInput, nil)
	}
	return out, nil
}

func checkName(name string) error {
	if name == "" {
		return temporal.NewNonRetryableApplicationError("checkpoint name is empty", api.ErrTypeBadInput, nil)
	}
	if api.IsReservedStateKey(name) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint name %q is reserved (reserved keys: %v)", name, api.ReservedStateKeys),
			api.ErrTypeReservedKey, nil)
	}
	return nil
}

// StepError is a failed checkpoint. Its message names the checkpoint and says what failed
// without Temporal's wrapping; Unwrap gives the original error.
type StepError struct {
	Name string
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("checkpoint %s: %s", e.Name, errorMessage(e.Err))
}

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// CheckpointAll runs independent steps in parallel. Each persists under its name as it
// completes and emits a "checkpoint" event carrying the name only. Steps already stored
// are not run. The first failure cancels the others and is returned; steps that completed
// stay stored, so a re-run pays only for the missing ones. Not atomic, by design.
//
// The result maps every name to its stored JSON.
func CheckpointAll(ctx workflow.Context, steps map[string]StepFunc) (map[string]json.RawMessage, error) {
	return CheckpointAllWith(ctx, steps, CheckpointAllOptions{})
}

// CheckpointAllOptions tunes CheckpointAllWith.
type CheckpointAllOptions struct {
	// MaxInFlight bounds how many steps run at once (0: all at once, as CheckpointAll).
	// Steps start in name order as slots free up; after a failure, steps not yet started
	// never start.
	MaxInFlight int
}

// CheckpointAllWith is CheckpointAll with options: results, events and errors as there.
func CheckpointAllWith(ctx workflow.Context, steps map[string]StepFunc, opts CheckpointAllOptions) (map[string]json.RawMessage, error) {
	if opts.MaxInFlight < 0 {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("CheckpointAll: MaxInFlight %d is negative (0: no bound)", opts.MaxInFlight), api.ErrTypeBadInput, nil)
	}
	names := sortedKeys(steps)
	rt, err := runtimeOf(ctx, fmt.Sprintf("checkpoints %v", names))
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := checkName(name); err != nil {
			return nil, err
		}
	}
	var pending []string
	for _, name := range names {
		if _, ok := rt.rec.State[name]; !ok {
			pending = append(pending, name)
		}
	}
	if len(pending) > 0 {
		cctx, cancel := workflow.WithCancel(ctx)
		running := len(pending)
		var first error
		var slots workflow.Semaphore
		if opts.MaxInFlight > 0 && opts.MaxInFlight < len(pending) {
			slots = workflow.NewSemaphore(ctx, int64(opts.MaxInFlight))
		}
		for _, name := range pending {
			name, step := name, steps[name]
			workflow.Go(cctx, func(gctx workflow.Context) {
				defer func() { running-- }()
				if slots != nil {
					if slots.Acquire(gctx, 1) != nil {
						return // canceled after a failure before it started: not run, not stored
					}
					defer slots.Release(1)
					if gctx.Err() != nil {
						return // the slot came free with the failure that cancels it
					}
				}
				v, err := step(withDefaultOptions(gctx))
				if err != nil {
					err = &StepError{Name: name, Err: err}
				} else {
					_, err = rt.store(ctx, name, v)
				}
				if err != nil && first == nil {
					first = err
					cancel()
				}
			})
		}
		// Wait for every step, also after a failure, so canceled activities are settled
		// before the run moves on.
		if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
			cancel()
			return nil, err
		}
		cancel()
		if first != nil {
			return nil, first
		}
	}
	out := make(map[string]json.RawMessage, len(names))
	for _, name := range names {
		out[name] = rt.rec.State[name]
	}
	return out, nil
}
