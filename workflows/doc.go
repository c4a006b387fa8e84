// Package workflows is the deterministic side of Nexo on Temporal: the run runtime (the run
// record, checkpoints, suspend/resume, events, artifacts), the platform's workflows, and the
// Register helpers a worker uses.
//
// Everything here runs inside Temporal workflow code, so it follows the determinism rules:
// no I/O, no wall clock, no map iteration in random order, no goroutines but workflow.Go.
// Side effects are activities referenced by name (api.Activity*), never imported.
//
// Authoring a workflow:
//
//	func Greet(ctx workflow.Context, in GreetInput) (GreetResult, error) {
//		name, err := workflows.Checkpoint[string](ctx, "lookup", "LookupName", in.UserID)
//		if err != nil {
//			return GreetResult{}, err
//		}
//		input, err := workflows.Suspend(ctx, "awaiting approval", "")
//		...
//	}
//
//	workflows.Register(w, "Greet", Greet, workflows.Options{})
//
// Unlike Nexo, Suspend is a true continuation: code before it does not run again when the
// run resumes, because Temporal replays history instead of re-entering the function.
package workflows
