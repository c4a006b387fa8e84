// Package activities holds every side effect of Nexo on Temporal: the artifact store
// writes, sandbox file operations and lifecycle, and the example workflows' steps. Each
// exported method of Activities is one Temporal activity, registered under the name in
// api (Register does it), so workflows reference them by name only.
//
// Errors are classified here, at the boundary: input that cannot work (a bad name, a path
// escaping the sandbox, a missing file) is a non-retryable application error; anything
// else is retried by Temporal under the workflow's retry policy.
package activities
