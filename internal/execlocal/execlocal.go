// Package execlocal holds values local to one workflow execution, the equivalent of the
// workflow-local variable the Temporal Go SDK does not have.
//
// Workflow code keys a Map by the execution's *workflow.Info: the SDK hands the same
// pointer to every context of one execution and a fresh one to every new execution. The
// executions of a worker run on goroutines of their own, so the map is guarded by a mutex;
// it is held only for a map access, never across anything that yields to the SDK's
// scheduler, so it cannot block a workflow coroutine nor change what replay does. That is
// why it lives here: workflow code itself imports no sync (api/boundary_test.go).
package execlocal

import "sync"

// Map maps executions (keys) to values. The zero value is ready to use.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// Set stores v for k.
func (m *Map[K, V]) Set(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[K]V{}
	}
	m.m[k] = v
}

// Get returns the value stored for k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Delete removes k's value.
func (m *Map[K, V]) Delete(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// Len is the number of values stored.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
