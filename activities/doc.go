// Package activities holds every side effect of Nexo on Temporal, as providers that each
// own their dependencies and register their own activities under the names in api
// (providers.go): Model (model calls, threads, compaction, token bookings, cost, agent
// resolution), MCP (its pool of clients and their OAuth tokens), Tools (built-in tools,
// fetch, web search, skills), Host (the run's sandbox, snapshots, park and restore,
// artifacts, stored records), Notifier and the example steps. Workflows reference the
// activities by name only; platform composes the providers on the task queues a worker
// polls.
//
// Errors are classified here, at the boundary: input that cannot work (a bad name, a path
// escaping the sandbox, a missing file) is a non-retryable application error; anything
// else is retried by Temporal under the workflow's retry policy.
package activities
