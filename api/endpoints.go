package api

// DefaultEndpoint is the name of the model endpoint configured under llm: itself; named
// endpoints live under llm.endpoints.
const DefaultEndpoint = "default"

// ModelTaskQueue is the task queue the model calls (CompleteChat, CompactThread) of an
// endpoint with a request rate limit go to: every worker of the fleet polls it with the
// endpoint's rate as the task queue's dispatch rate, so the server paces the calls of all
// runs on all workers together.
func ModelTaskQueue(taskQueue, endpoint string) string {
	return taskQueue + "-llm-" + endpoint
}
