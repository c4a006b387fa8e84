package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nexo-temporal/nexo/api"
)

// storeRecordOptions: storing the record is one blob write; a few attempts, then the run
// closes without it (clients fall back to the query).
var storeRecordOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// persist stores the run's final record and puts its reference in the memo. Called last,
// once the outcome is in the record, so the stored record is what the query would answer.
// Best effort: a failure is logged and leaves no reference, never a changed outcome (no
// event either, which would make the stored record differ from the query's).
//
// A local activity, because its input never reaches history: the record goes from the
// workflow's memory to the worker's activity in-process, and history keeps only the
// marker with the activity's result, the reference. (A worker that does not register
// StoreRecord fails it at once; the run closes without a stored record.)
func (rt *runtime) persist(ctx workflow.Context) {
	if workflow.GetVersion(ctx, ChangeRecordAtClose, workflow.DefaultVersion, 1) < 1 {
		return
	}
	rec, _ := rt.query()
	var ref api.RecordRef
	lctx := workflow.WithLocalActivityOptions(ctx, storeRecordOptions)
	if err := workflow.ExecuteLocalActivity(lctx, api.ActivityStoreRecord, rec).Get(lctx, &ref); err != nil {
		workflow.GetLogger(ctx).Warn("store the run record failed; clients read this run by replaying it", "error", err)
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{api.MemoRecord: ref}); err != nil {
		workflow.GetLogger(ctx).Warn("upsert the record reference failed", "error", err)
	}
}

// eventsPage answers api.QueryEvents: the events after seq after, at most limit (0: the
// default) and at most api.MaxEventPageBytes of them.
func (rt *runtime) eventsPage(after int64, limit int) (api.EventPage, error) {
	if limit <= 0 {
		limit = api.DefaultEventPage
	}
	limit = min(limit, api.MaxEventPage)
	p := api.EventPage{ID: rt.rec.ID, Status: rt.rec.Status, Events: []api.Event{}, LastSeq: rt.lastSeq(),
		FirstSeq: rt.seqBase + 1, Checkpoints: []string{}, Artifacts: []api.ArtifactSum{},
		Error: rt.rec.Error, UpdatedAt: rt.rec.UpdatedAt}
	for _, k := range sortedKeys(rt.rec.State) {
		if api.IsReservedStateKey(k) {
			if p.Waiting == nil {
				p.Waiting = map[string]json.RawMessage{}
			}
			p.Waiting[k] = rt.rec.State[k]
		} else {
			p.Checkpoints = append(p.Checkpoints, k)
		}
	}
	for _, a := range rt.rec.Artifacts {
		p.Artifacts = append(p.Artifacts, api.ArtifactSum{Name: a.Name, SHA256: a.SHA256})
	}
	// Events are numbered without gaps from seqBase+1: the first after `after` is at
	// index after-seqBase.
	i := max(after-rt.seqBase, 0)
	size := 0
	for ; i < int64(len(rt.rec.Events)) && len(p.Events) < limit; i++ {
		ev := rt.rec.Events[i]
		n := len(ev.Data) + len(ev.Type) + 64
		if len(p.Events) > 0 && size+n > api.MaxEventPageBytes {
			break
		}
		size += n
		p.Events = append(p.Events, ev)
	}
	p.More = i < int64(len(rt.rec.Events))
	return p, nil
}
