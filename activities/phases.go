package activities

import (
	"context"
	"sync"
	"time"
)

// Phases times the parts of a tool call (the sandbox claimed or opened, the command, and
// the snapshot after it: listing, file reads, uploads, manifest) for whoever asks through
// WithPhases: the first-call benchmarks (BenchmarkDockerFirstCall), which must say where a
// call's time goes, not only how long it took. A context without a recorder costs one
// lookup per phase; nothing is logged or kept.
type Phases struct {
	mu    sync.Mutex
	order []string
	d     map[string]time.Duration
}

// Names of the phases a tool call records.
const (
	PhaseOpen     = "open"     // the sandbox opened (a Docker run's first call: claimed)
	PhaseCommand  = "command"  // the shell command, or the file tool's work
	PhaseList     = "list"     // the workspace listed for the snapshot
	PhaseRead     = "read"     // changed files read out of the workspace
	PhaseUpload   = "upload"   // their contents put in the store
	PhaseManifest = "manifest" // the manifest encoded and stored
	PhaseSnapshot = "snapshot" // the whole snapshot after the call (list, read, upload, manifest)
)

type phasesKey struct{}

// WithPhases returns ctx carrying p: the tool-call code under it adds its phases to p.
func WithPhases(ctx context.Context, p *Phases) context.Context {
	return context.WithValue(ctx, phasesKey{}, p)
}

// phaseSince adds the time since start to phase name of ctx's recorder, if it has one.
func phaseSince(ctx context.Context, name string, start time.Time) {
	p, _ := ctx.Value(phasesKey{}).(*Phases)
	if p == nil {
		return
	}
	d := time.Since(start)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.d == nil {
		p.d = map[string]time.Duration{}
	}
	if _, ok := p.d[name]; !ok {
		p.order = append(p.order, name)
	}
	p.d[name] += d
}

// Get returns the time recorded for phase name (0 if none).
func (p *Phases) Get(name string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.d[name]
}

// Reset forgets every phase, for the next call.
func (p *Phases) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order, p.d = nil, nil
}
