package payloads

import "sync/atomic"

// offloaded counts the bytes this process's drivers stored (the nexo_payload_offloaded_bytes
// metric): every client and worker of a process share the one counter.
var offloaded atomic.Int64

// OffloadedBytes is how many serialized payload bytes this process has stored in the blob
// store through External Storage since it started.
func OffloadedBytes() int64 { return offloaded.Load() }
