package main

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// activityLog is what a run's history says about its activities: how many of each type
// completed, and which worker identity started each one (its last attempt: history keeps the
// started event of the attempt that closed the activity).
type activityLog struct {
	completed map[string]int
	startedBy map[string]int // identity → activities started
}

// readActivities reads run id's whole history (every run of the chain).
func readActivities(ctx context.Context, tc client.Client, id string) (activityLog, error) {
	log := activityLog{completed: map[string]int{}, startedBy: map[string]int{}}
	it := tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	types := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return log, err
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			types[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			log.startedBy[ev.GetActivityTaskStartedEventAttributes().GetIdentity()]++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			log.completed[types[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]]++
		}
	}
	return log, nil
}
